package scenario

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/topo"
)

// Every key of a scenario file is one option (one flag), or a documented
// exception; every option is a key, and no two options share a key or a
// flag.
func TestEveryKeyIsOneOption(t *testing.T) {
	byKey, byFlag := map[string]int{}, map[string]int{}
	for _, o := range Options() {
		byKey[o.Key]++
		byFlag[o.FlagName()]++
		require.NotEmpty(t, o.Help, o.Key)
		require.NotEmpty(t, o.Arg, o.Key)
	}
	for _, k := range Keys() {
		_, exception := Exceptions[k]
		switch {
		case exception:
			assert.Zero(t, byKey[k], "%s is an exception and an option", k)
		default:
			assert.Equal(t, 1, byKey[k], "scenario key %q: want exactly one option (or an entry in Exceptions)", k)
		}
		delete(byKey, k)
	}
	assert.Empty(t, byKey, "options without a scenario key")
	for f, n := range byFlag {
		assert.Equal(t, 1, n, "flag --%s declared %d times", f, n)
	}
	for k := range Exceptions {
		assert.Contains(t, Keys(), k, "an exception that is no key")
	}
}

// Each option's field takes what a flag gives it: the types the command
// line knows how to set.
func TestOptionFields(t *testing.T) {
	var s Scenario
	for _, o := range Options() {
		f, err := o.Field(&s)
		require.NoError(t, err, o.Key)
		want := map[Kind][]reflect.Type{
			Number: {reflect.TypeFor[*int](), reflect.TypeFor[*uint64]()},
			List:   {reflect.TypeFor[[]string]()},
		}[o.Kind]
		if want == nil {
			want = []reflect.Type{reflect.TypeFor[string]()}
			if o.Key == "topology" {
				want = []reflect.Type{reflect.TypeFor[*topo.Spec]()}
			}
		}
		assert.Contains(t, want, f.Type(), o.Key)
	}
}

// The defaults the flags show are what a scenario without the key runs:
// applying each shown default changes nothing.
func TestOptionDefaultsAreTheRunsDefaults(t *testing.T) {
	for _, o := range Options() {
		if o.Default == "" {
			continue
		}
		var s Scenario
		f, err := o.Field(&s)
		require.NoError(t, err)
		switch f.Kind() {
		case reflect.String:
			f.SetString(o.Default)
		case reflect.Pointer:
			require.Equal(t, reflect.Int, f.Type().Elem().Kind(), o.Key)
			n := 0
			_, err := fmt.Sscan(o.Default, &n)
			require.NoError(t, err, o.Key)
			f.Set(reflect.ValueOf(&n))
		}
		want, got := emu.DefaultConfig(), emu.DefaultConfig()
		require.NoError(t, s.Apply(&got), o.Key)
		if o.Key == "queue" {
			want.Link.Queue = 1000 // 0 is the default queue, 1000 frames
		}
		if o.Key == "max_time" {
			assert.Equal(t, time.Minute, got.MaxVirtual) // emu reads 0 as one minute
			want.MaxVirtual = got.MaxVirtual
		}
		assert.Equal(t, want, got, "--%s %s", o.FlagName(), o.Default)
	}
}
