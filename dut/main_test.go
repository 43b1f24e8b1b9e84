package dut

import (
	"testing"

	"github.com/inaemu/inaemu/internal/testtool"
)

// TestMain keeps what the tests and the programs they start leave in
// the temporary directory (built programs, device logs) in one of this
// test binary's own, removed when it ends (testtool.Main).
func TestMain(m *testing.M) { testtool.Main(m) }
