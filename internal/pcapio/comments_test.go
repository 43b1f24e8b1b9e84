package pcapio_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inaemu/inaemu/internal/pcapio"
)

func TestFaultOf(t *testing.T) {
	for _, c := range []struct {
		comments []string
		ok       bool
		want     pcapio.Fault
	}{
		{nil, false, pcapio.Fault{}},
		{[]string{"a note by hand"}, false, pcapio.Fault{}},
		{[]string{"inaemu: fault=corrupt"}, true, pcapio.Fault{Kinds: "corrupt"}},
		{[]string{"inaemu: fault=loss (not delivered)"}, true, pcapio.Fault{Kinds: "loss", Ghost: true}},
		// The spec's own delay= is not the extra delay written after it.
		{[]string{`inaemu: fault=delay spec="delay=30us port=1 dir=in" extra_delay=30000ns`}, true,
			pcapio.Fault{Kinds: "delay", ExtraDelay: 30 * time.Microsecond}},
		{[]string{"other", "inaemu: fault=duplicate,delay,reorder extra_delay=2301ns"}, true,
			pcapio.Fault{Kinds: "duplicate,delay,reorder", ExtraDelay: 2301}},
		{[]string{"inaemu: fault=delay extra_delay=junk"}, true, pcapio.Fault{Kinds: "delay"}},
	} {
		f, ok := pcapio.FaultOf(c.comments)
		assert.Equal(t, c.ok, ok, "%q", c.comments)
		assert.Equal(t, c.want, f, "%q", c.comments)
	}
	f, _ := pcapio.FaultOf([]string{"inaemu: fault=duplicate,delay"})
	assert.True(t, f.Has("delay"))
	assert.True(t, f.Has("duplicate"))
	assert.False(t, f.Has("dup"))
}
