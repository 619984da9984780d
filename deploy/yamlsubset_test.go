package deploy

import (
	"fmt"
	"strconv"
	"strings"
)

// parseYAML parses the subset of YAML the deployment files use: block
// mappings and sequences by indentation, flow sequences of scalars
// ([a, "b"]), plain, single- and double-quoted scalars, and comments. It
// fails on anything else (anchors, multi-line scalars, flow mappings), so a
// file that needs more makes the test fail rather than pass unchecked.
// Mappings are map[string]any, sequences []any, scalars string.
func parseYAML(src string) (any, error) {
	var lines []yline
	for n, raw := range strings.Split(src, "\n") {
		text := stripComment(raw)
		if strings.TrimSpace(text) == "" {
			continue
		}
		if strings.Contains(text[:len(text)-len(strings.TrimLeft(text, " \t"))], "\t") {
			return nil, fmt.Errorf("line %d: tab in indentation", n+1)
		}
		trimmed := strings.TrimLeft(text, " ")
		for _, bad := range []string{"&", "*", "!", "|", ">", "{"} {
			if strings.HasPrefix(strings.TrimPrefix(trimmed, "- "), bad) {
				return nil, fmt.Errorf("line %d: %q is outside the YAML subset", n+1, trimmed)
			}
		}
		lines = append(lines, yline{n: n + 1, indent: len(text) - len(trimmed), text: strings.TrimRight(trimmed, " ")})
	}
	if len(lines) == 0 {
		return nil, nil
	}
	p := &yparser{lines: lines}
	v, err := p.block(0, lines[0].indent)
	if err != nil {
		return nil, err
	}
	if p.i != len(lines) {
		return nil, fmt.Errorf("line %d: unexpected indentation", lines[p.i].n)
	}
	return v, nil
}

type yline struct {
	n, indent int
	text      string
}

type yparser struct {
	lines []yline
	i     int
}

func (p *yparser) block(i, indent int) (any, error) {
	p.i = i
	if isSeqItem(p.lines[i].text) {
		return p.seq(indent)
	}
	return p.mapping(indent)
}

func isSeqItem(s string) bool { return s == "-" || strings.HasPrefix(s, "- ") }

func (p *yparser) seq(indent int) ([]any, error) {
	out := []any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		rest := strings.TrimLeft(strings.TrimPrefix(l.text, "-"), " ")
		switch {
		case rest == "":
			if p.i+1 >= len(p.lines) || p.lines[p.i+1].indent <= indent {
				out = append(out, "")
				p.i++
				continue
			}
			v, err := p.block(p.i+1, p.lines[p.i+1].indent)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		case isMapEntry(rest):
			inner := indent + len(l.text) - len(rest)
			p.lines[p.i] = yline{n: l.n, indent: inner, text: rest}
			v, err := p.mapping(inner)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		default:
			v, err := scalar(rest, l.n)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
			p.i++
		}
	}
	return out, nil
}

// isMapEntry reports whether s is "key: value" or "key:" with a plain key.
func isMapEntry(s string) bool {
	if strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "'") || strings.HasPrefix(s, "[") {
		return false
	}
	return strings.Contains(s, ": ") || strings.HasSuffix(s, ":")
}

func (p *yparser) mapping(indent int) (map[string]any, error) {
	out := map[string]any{}
	for p.i < len(p.lines) && p.lines[p.i].indent == indent && !isSeqItem(p.lines[p.i].text) {
		l := p.lines[p.i]
		if !isMapEntry(l.text) {
			return nil, fmt.Errorf("line %d: want key: value, got %q", l.n, l.text)
		}
		key, val, _ := strings.Cut(l.text, ":")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("line %d: key %q repeated", l.n, key)
		}
		p.i++
		if strings.ContainsAny(val[:min(len(val), 1)], "&*!|>{") {
			return nil, fmt.Errorf("line %d: %q is outside the YAML subset", l.n, val)
		}
		if val != "" {
			v, err := scalar(val, l.n)
			if err != nil {
				return nil, err
			}
			out[key] = v
			continue
		}
		if p.i < len(p.lines) && (p.lines[p.i].indent > indent || p.lines[p.i].indent == indent && isSeqItem(p.lines[p.i].text)) {
			v, err := p.block(p.i, p.lines[p.i].indent)
			if err != nil {
				return nil, err
			}
			out[key] = v
			continue
		}
		out[key] = ""
	}
	return out, nil
}

// scalar parses a plain or quoted scalar, or a flow sequence of them.
func scalar(s string, n int) (any, error) {
	switch {
	case strings.HasPrefix(s, "["):
		if !strings.HasSuffix(s, "]") {
			return nil, fmt.Errorf("line %d: unterminated flow sequence", n)
		}
		out := []any{}
		for _, item := range splitFlow(s[1 : len(s)-1]) {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			v, err := scalar(item, n)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case strings.HasPrefix(s, `"`):
		v, err := strconv.Unquote(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %s: %w", n, s, err)
		}
		return v, nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return nil, fmt.Errorf("line %d: unterminated quote", n)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	}
	return s, nil
}

// splitFlow splits a flow sequence body at commas outside quotes.
func splitFlow(s string) []string {
	var out []string
	var quote byte
	start := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '"' || c == '\'':
			quote = c
		case c == ',':
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// stripComment removes a "#" comment that starts a line or follows a blank,
// outside quotes.
func stripComment(line string) string {
	var quote byte
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else if c == '\\' && quote == '"' {
				i++
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '#' && (i == 0 || line[i-1] == ' '):
			return line[:i]
		}
	}
	return line
}
