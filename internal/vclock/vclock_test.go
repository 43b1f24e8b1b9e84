package vclock

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOrderAndTime(t *testing.T) {
	c := New()
	var got []string
	at := func(name string) func() { return func() { got = append(got, name+"@"+c.Now().String()) } }
	c.AfterFunc(2*time.Microsecond, at("b"))
	c.AfterFunc(time.Microsecond, at("a"))
	c.AfterFunc(2*time.Microsecond, at("c")) // same instant as b: scheduled later, fires later
	stopped := c.AfterFunc(time.Microsecond, at("never"))
	assert.True(t, stopped.Stop())
	assert.False(t, stopped.Stop())
	moved := c.AfterFunc(time.Microsecond, at("moved"))
	assert.True(t, moved.Reset(5*time.Microsecond))
	assert.Equal(t, 3, c.Run(2*time.Microsecond))
	assert.Equal(t, []string{"a@1µs", "b@2µs", "c@2µs"}, got)
	assert.Equal(t, 1, c.Advance(10*time.Microsecond))
	assert.Equal(t, []string{"a@1µs", "b@2µs", "c@2µs", "moved@5µs"}, got)
	assert.Equal(t, 12*time.Microsecond, c.Now())
	assert.False(t, c.Step())
	assert.Zero(t, c.Pending())
}

func TestCallbackSchedulesMore(t *testing.T) {
	c := New()
	n := 0
	var tick func()
	tick = func() {
		n++
		if n < 5 {
			c.AfterFunc(time.Nanosecond, tick)
		}
	}
	c.AfterFunc(0, tick)
	c.Run(time.Second)
	assert.Equal(t, 5, n)
	assert.Equal(t, 4*time.Nanosecond, c.Now())
}

func TestAdvanceToAndNext(t *testing.T) {
	c := New()
	_, ok := c.Next()
	assert.False(t, ok)
	fired := 0
	c.AfterFunc(3*time.Microsecond, func() { fired++ })
	c.AfterFunc(7*time.Microsecond, func() { fired++ })
	next, ok := c.Next()
	assert.True(t, ok)
	assert.Equal(t, 3*time.Microsecond, next)
	assert.Equal(t, 1, c.AdvanceTo(5*time.Microsecond))
	assert.Equal(t, 5*time.Microsecond, c.Now())
	assert.Equal(t, 0, c.AdvanceTo(4*time.Microsecond), "time never runs backward")
	assert.Equal(t, 5*time.Microsecond, c.Now())
	c.AfterFunc(0, func() { fired++ })
	assert.Equal(t, 1, c.AdvanceTo(5*time.Microsecond), "an event due now fires without time moving")
	next, _ = c.Next()
	assert.Equal(t, 7*time.Microsecond, next)
	assert.Equal(t, 1, c.AdvanceTo(7*time.Microsecond))
	assert.Equal(t, 3, fired)
}
