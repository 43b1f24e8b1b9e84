package job

import (
	"fmt"
	"strings"
)

// Verb is what a verbs job's ranks do.
type Verb string

const (
	VerbWrite    Verb = "write"
	VerbRead     Verb = "read"
	VerbFetchAdd Verb = "fetch-add"
	VerbCmpSwap  Verb = "cmp-swap"
)

// AllVerbs lists the verbs in the order help names them.
var AllVerbs = []Verb{VerbWrite, VerbRead, VerbFetchAdd, VerbCmpSwap}

// ParseVerb reads write, read, fetch-add or cmp-swap.
func ParseVerb(s string) (Verb, error) {
	for _, v := range AllVerbs {
		if string(v) == s {
			return v, nil
		}
	}
	names := make([]string, len(AllVerbs))
	for i, v := range AllVerbs {
		names[i] = string(v)
	}
	return "", fmt.Errorf("%q: want %s", s, strings.Join(names, ", "))
}

func (v Verb) String() string {
	if v == "" {
		return string(VerbWrite)
	}
	return string(v)
}

// Atomic reports whether v is an atomic (fetch-add, cmp-swap).
func (v Verb) Atomic() bool { return v == VerbFetchAdd || v == VerbCmpSwap }
