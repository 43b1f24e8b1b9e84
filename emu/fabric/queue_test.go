package fabric_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/fabric"
)

// TestDropTail: packets leave in ready order, in arrival order for equal
// times; nothing leaves before it is ready (Dequeue says when); a full
// queue refuses at the tail.
func TestDropTail(t *testing.T) {
	q, err := fabric.NewQueue("", fabric.QueueConfig{Limit: 3})
	require.NoError(t, err)
	_, next, ok := q.Dequeue(0)
	assert.False(t, ok)
	assert.Equal(t, fabric.Never, next, "empty")
	for i, r := range []time.Duration{20, 10, 20} {
		require.True(t, q.Enqueue(fabric.Packet{Frame: []byte{byte(i)}, Ready: r, Tag: uint32(i)}))
	}
	assert.False(t, q.Enqueue(fabric.Packet{Frame: []byte{9}, Ready: 0}), "full: tail drop, even of an earlier packet")
	assert.Equal(t, 3, q.Len())
	_, next, ok = q.Dequeue(5)
	assert.False(t, ok)
	assert.Equal(t, 10*time.Nanosecond, next)
	var order []byte
	for now := time.Duration(10); q.Len() > 0; now += 10 {
		for {
			p, _, ok := q.Dequeue(now)
			if !ok {
				break
			}
			assert.Equal(t, uint32(p.Frame[0]), p.Tag)
			order = append(order, p.Frame[0])
		}
	}
	assert.Equal(t, []byte{1, 0, 2}, order)
}

// TestQueueByName: droptail is the default; an unknown discipline is
// refused with the known ones, by NewQueue and by the fabric.
func TestQueueByName(t *testing.T) {
	assert.Equal(t, []string{"droptail", "prio"}, fabric.QueueDisciplines())
	q, err := fabric.NewQueue("droptail", fabric.QueueConfig{Limit: 1})
	require.NoError(t, err)
	assert.IsType(t, &fabric.DropTail{}, q)
	_, err = fabric.NewQueue("red", fabric.QueueConfig{})
	assert.EqualError(t, err, `queue discipline "red": want one of droptail, prio`)
	_, err = fabric.New(fabric.Config{Hosts: 2, Link: fabric.LinkConfig{Rate: 10e9}, Queue: "red"})
	assert.ErrorContains(t, err, `queue discipline "red"`)
}
