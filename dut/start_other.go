//go:build !unix

package dut

import (
	"errors"
	"time"

	"github.com/inaemu/inaemu/emu"
)

// start would run the device command in its own process group, which
// needs a Unix system (the device's ports need Linux anyway).
func (d Device) start(cfg emu.Config, timeout time.Duration) (func(), error) {
	return nil, errors.New("a device command needs a Unix system")
}
