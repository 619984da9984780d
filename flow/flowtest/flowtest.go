// Package flowtest helps tests check a flow's description.
package flowtest

import (
	"slices"

	"github.com/dropstream/dropstream/flow"
)

// StageNames returns the names of d's stages and history stages, sorted.
func StageNames(d flow.Description) []string {
	var out []string
	for _, s := range d.Stages {
		out = append(out, s.Name)
	}
	for _, h := range d.History {
		for _, g := range h.Groups {
			out = append(out, g.Name)
		}
	}
	slices.Sort(out)
	return out
}
