package flow

import (
	"errors"
	"fmt"
)

// Validate checks a list of definitions: names present and unique, a
// builder each, variables and bench targets unique.
func Validate(defs []Definition) error {
	var errs []error
	names := map[string]bool{}
	benches := map[string]bool{}
	for _, d := range defs {
		if d.Name == "" || d.Build == nil {
			errs = append(errs, fmt.Errorf("flow %q: needs a name and a builder", d.Name))
		}
		if names[d.Name] {
			errs = append(errs, fmt.Errorf("flow %q defined twice", d.Name))
		}
		names[d.Name] = true
		for _, b := range d.Benches {
			if benches[b.Name] || b.Name == "" || b.Bind == nil {
				errs = append(errs, fmt.Errorf("flow %s: bench target %q unnamed, without Bind, or defined twice", d.Name, b.Name))
			}
			benches[b.Name] = true
		}
	}
	var all []Var
	for _, d := range defs {
		all = append(all, d.Vars...)
	}
	if _, err := ReadVars(all, func(string) (string, bool) { return "", false }); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
