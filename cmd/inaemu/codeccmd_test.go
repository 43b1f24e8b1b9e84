package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inaemu codec --values shows the worked vectors of bound 2^-10 (tag,
// field, decoded bits), in the table and in JSON.
func TestCodecValues(t *testing.T) {
	code, out, errOut := runCLI("codec", "--bound", "10", "--values", "0.75,0.3,0.004,0.0009,1.5,-inf,0x3d800000")
	require.Equal(t, 0, code, errOut)
	for _, line := range []string{
		"0.75        0x3f400000  10   16bit  0x6000      0.75       0x3f400000    0\n",
		"0.3         0x3e99999a  10   16bit  0x2666      0.2999878  0x3e999800    1.22e-05\n",
		"0.004       0x3b83126f  01   8bit   0x00        0          0x00000000    0.004\n",
		"0.0009      0x3a6bedfa  00   0bit   -           0          0x00000000    0.0009\n",
		"-inf        0xff800000  11   32bit  0xff800000  -Inf       0xff800000    0\n",
		"0x3d800000  0x3d800000  10   16bit  0x0800      0.0625     0x3d800000    0\n",
	} {
		assert.Contains(t, out, line)
	}
	code, out, errOut = runCLI("codec", "--bound", "6", "--values", "0.02,-0.2", "--json")
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Values []struct {
			Tag, Field, DecodedBits string
			FieldBits               int `json:"field_bits"`
		} `json:"values"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	// 0.02 = 1.28 × 2^-6: the 8-bit class at 2^-6 ([2^-6, 2^-3)), field
	// floor(0.02 × 128) = 2; -0.2 is 16-bit (>= 2^-3): 1<<15 | floor(0.2 × 2^15).
	require.Len(t, doc.Values, 2)
	assert.Equal(t, "01", doc.Values[0].Tag)
	assert.Equal(t, "0x02", doc.Values[0].Field)
	assert.Equal(t, 8, doc.Values[0].FieldBits)
	assert.Equal(t, "10", doc.Values[1].Tag)
	assert.Equal(t, "0x9999", doc.Values[1].Field) // 1<<15 | floor(0.2 × 2^15) = 0x8000 | 6553
}

// inaemu codec --pattern: the class histogram is the values' magnitudes
// counted here by range, the ratios follow from it, the same seed gives
// the same report.
func TestCodecPattern(t *testing.T) {
	args := []string{"codec", "--bound", "8", "--pattern", "lognormal:-6,2", "--count", "50000", "--mtu", "1024", "--seed", "3", "--json"}
	code, out, errOut := runCLI(args...)
	require.Equal(t, 0, code, errOut)
	var st struct {
		Values       int              `json:"values"`
		Classes      map[string]int64 `json:"classes"`
		CodecRatio   float64          `json:"codec_ratio"`
		Packets      int              `json:"packets"`
		PayloadRatio float64          `json:"payload_ratio"`
		WireRatio    float64          `json:"wire_ratio"`
		MaxBelow1    float64          `json:"max_abs_error_below_1"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	buf := make([]byte, 4*50000)
	require.NoError(t, genStream("lognormal:-6,2", 8, 3, buf))
	want := map[string]int64{}
	for i := 0; i < len(buf); i += 4 {
		a := math.Abs(float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))))
		switch {
		case a < math.Ldexp(1, -8):
			want["0bit"]++
		case a < math.Ldexp(1, -4):
			want["8bit"]++
		case a < 1:
			want["16bit"]++
		default:
			want["32bit"]++
		}
	}
	assert.Equal(t, want, st.Classes)
	bits := 2*want["0bit"] + 10*want["8bit"] + 18*want["16bit"] + 34*want["32bit"]
	assert.InDelta(t, 32*50000/float64(bits), st.CodecRatio, 1e-9)
	assert.Equal(t, 50000*4/1024+1, st.Packets)
	assert.Less(t, st.PayloadRatio, st.CodecRatio) // length, tag vectors and padding per packet
	assert.Greater(t, st.PayloadRatio, 0.97*st.CodecRatio)
	assert.Less(t, st.WireRatio, st.PayloadRatio)
	assert.Less(t, st.MaxBelow1, math.Ldexp(1, -7))
	_, again, _ := runCLI(args...)
	assert.Equal(t, out, again)
}

// Nonsense is one line and exit 2.
func TestCodecUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"codec"}, "give --values x,y,... or --pattern P"},
		{[]string{"codec", "--bound", "0", "--values", "1"}, "--bound 0: want 1..126"},
		{[]string{"codec", "--values", "abc"}, `--values "abc": want a decimal`},
		{[]string{"codec", "--values", "1", "--pattern", "random"}, "--values and --pattern: give one"},
		{[]string{"codec", "--pattern", "gauss"}, "--pattern gauss: want random, zeros, ones, ramp, lognormal:MU,SIGMA, lognormal:resnet50|hdc or table3:NETWORK[,K]"},
		{[]string{"codec", "--pattern", "table3:lenet"}, `tensor pattern "table3:lenet": Table III has alexnet, hdc, resnet50 and vgg16`},
		{[]string{"codec", "--pattern", "table3:vgg16", "--bound", "7"}, "Table III has the bounds 2^-6, 2^-8 and 2^-10, not 2^-7"},
		{[]string{"codec", "--pattern", "table3:vgg16,x"}, `error bound "x"`},
		{[]string{"codec", "--pattern", "lognormal:1,-2"}, "SIGMA >= 0"},
		{[]string{"codec", "--pattern", "lognormal:vgg16"}, "lognormal:resnet50|hdc"},
		{[]string{"codec", "--pattern", "random", "--count", "0"}, "--count 0"},
		{[]string{"codec", "--pattern", "random", "--mtu", "70000"}, "--mtu 70000"},
	} {
		code, out, errOut := runGuarded(c.args...)
		assert.Empty(t, out)
		oneLine(t, code, errOut, "inaemu codec: ", c.want)
	}
}

// Streams drawn to Table III's class shares compress to the ratio the
// table implies, 32 bits over 2·p2 + 10·p10 + 18·p18 + 34·p34 (5.59× to
// 14.60×), within 1 %, for every network and bound; the ratios here are
// the table's arithmetic, written out.
func TestCodecTable3Ratios(t *testing.T) {
	implied := map[string][3]float64{ // bounds 2^-10, 2^-8, 2^-6
		"alexnet": {5.59, 8.81, 12.34}, "hdc": {11.59, 13.25, 14.59}, "resnet50": {9.11, 12.15, 14.60}, "vgg16": {11.20, 13.89, 14.44},
	}
	for net, ratios := range implied {
		for i, k := range []string{"10", "8", "6"} {
			code, out, errOut := runCLI("codec", "--bound", k, "--pattern", "table3:"+net, "--count", "400000", "--json")
			require.Equal(t, 0, code, errOut)
			var st struct {
				CodecRatio   float64 `json:"codec_ratio"`
				PayloadRatio float64 `json:"payload_ratio"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &st))
			assert.InDelta(t, 1, st.CodecRatio/ratios[i], 0.01, "%s at 2^-%s: codec ratio %.3f, Table III %.2f", net, k, st.CodecRatio, ratios[i])
			assert.InDelta(t, 1, st.PayloadRatio/ratios[i], 0.01, "%s at 2^-%s: payload ratio %.3f, Table III %.2f", net, k, st.PayloadRatio, ratios[i])
		}
	}
}

// The log-normal presets reproduce the ratios the INCEPTIONN
// specification fitted them to (log2|g| ~ N(-13.2, 3.6) and N(-19.0, 6.4):
// 8.92/12.13/14.53× and 11.52/13.10/14.27× at 2^-10/2^-8/2^-6), to 0.5 %.
func TestCodecLogNormalPresets(t *testing.T) {
	for net, ratios := range map[string][3]float64{"resnet50": {8.92, 12.13, 14.53}, "hdc": {11.52, 13.10, 14.27}} {
		for i, k := range []string{"10", "8", "6"} {
			code, out, errOut := runCLI("codec", "--bound", k, "--pattern", "lognormal:"+net, "--count", "400000", "--json")
			require.Equal(t, 0, code, errOut)
			var st struct {
				CodecRatio float64 `json:"codec_ratio"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &st))
			assert.InEpsilon(t, ratios[i], st.CodecRatio, 0.005, "lognormal:%s at 2^-%s", net, k)
		}
	}
}

// The wire ratio with RoCEv2/IPv4 framing (82 bytes a packet) at a 4096-
// byte payload: (P + H)/(P/r + H), 11.5× for r = 14.60 (ResNet-50 at 2^-6)
// and 5.1× for r = 5.59 (AlexNet at 2^-10).
func TestCodecWireRatio(t *testing.T) {
	for _, c := range []struct {
		net, k string
		want   float64
	}{{"resnet50", "6", (4096 + 82) / (4096/14.60 + 82)}, {"alexnet", "10", (4096 + 82) / (4096/5.59 + 82)}} {
		code, out, errOut := runCLI("codec", "--bound", c.k, "--pattern", "table3:"+c.net, "--count", "400000", "--json")
		require.Equal(t, 0, code, errOut)
		var st struct {
			WireRatio float64 `json:"wire_ratio"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &st))
		assert.InDelta(t, 1, st.WireRatio/c.want, 0.01, "%s: %.3f, want %.3f", c.net, st.WireRatio, c.want)
	}
}
