// Package wireshark holds the Lua dissector for inaemu's INA headers
// (NetReduce's INA header, multi-rack NetReduce's switch-to-switch frames,
// INCEPTIONN's packed payloads, INA-PS frames and the INA-PS reliable
// channel), embedded so that `inaemu dissector` can print or install it
// from any directory.
package wireshark

import _ "embed"

// Lua is the dissector's source, inaemu.lua.
//
//go:embed inaemu.lua
var Lua []byte

// FileName is the name the dissector is installed under.
const FileName = "inaemu.lua"
