// fpadd_check compares the design's lane arithmetic (fpadd.sv) with the
// host CPU's: binary32 addition as the C++ compiler emits it (SSE, round to
// nearest even, subnormals kept, inf + -inf the default NaN 0xFFC00000),
// and for binary16 the hosts' rule —
// widen, add in binary32, round to binary16 to nearest even — written
// here independently. Random operands of every exponent, near-cancelling
// pairs, subnormals, zeros and infinities. Prints "ok N" or the first
// mismatches, exit status 1.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>

#include "Vfpadd_tb.h"
#include "verilated.h"

static float f(uint32_t u) { float x; memcpy(&x, &u, 4); return x; }
static uint32_t u(float x) { uint32_t v; memcpy(&v, &x, 4); return v; }

static float h2f(uint16_t h) {
    int e = (h >> 10) & 31, m = h & 1023;
    float s = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 31) return m ? NAN : s * INFINITY;
    if (e == 0) return s * std::ldexp(float(m), -24);
    return s * std::ldexp(float(1024 + m), e - 25);
}

static uint16_t f2h(float x) {
    uint16_t s = std::signbit(x) ? 0x8000 : 0;
    double a = std::fabs(double(x));
    if (std::isnan(x)) return s | 0x7E00;
    if (a >= 65520.0) return s | 0x7C00;
    if (a >= std::ldexp(1.0, -14)) {
        int e;
        double fr = std::frexp(a, &e);                 // a = fr * 2^e, fr in [0.5, 1)
        double m = std::nearbyint(std::ldexp(fr, 11)); // 11 significant bits, ties to even
        if (m == 2048) { m = 1024; e++; }
        if (e - 1 + 15 >= 31) return s | 0x7C00;
        return s | uint16_t((e - 1 + 15) << 10) | uint16_t(int(m) - 1024);
    }
    return s | uint16_t(std::nearbyint(std::ldexp(a, 24)));
}

int main(int argc, char** argv) {
    auto ctx = new VerilatedContext;
    ctx->commandArgs(argc, argv);
    auto tb = new Vfpadd_tb(ctx);
    std::mt19937_64 rng(38);
    auto operand = [&](uint32_t other) -> uint32_t {
        uint32_t r = uint32_t(rng());
        switch (rng() % 8) {
        case 0: return r & 0x807FFFFF;                          // subnormal or zero
        case 1: return (other ^ 0x80000000) ^ (r & 0x3F);       // near -other: cancellation
        case 2: return (other & 0xFF800000) | (r & 0x807FFFFF); // same exponent
        case 3: return (r & 0x80000000) | 0x7F800000;           // infinity
        case 4: return (other + (r & 0x0F000000)) ^ (r & 0x80000000); // exponents close
        default: return r;
        }
    };
    long n = 0, bad = 0;
    for (long i = 0; i < 4000000; i++) {
        uint32_t a = uint32_t(rng()), b = operand(a);
        if (rng() % 2) std::swap(a, b);
        uint16_t ha = uint16_t(rng()), hb = uint16_t(rng() % 4 == 0 ? (ha ^ 0x8000) ^ (rng() & 7) : rng());
        tb->a = a; tb->b = b; tb->ha = ha; tb->hb = hb;
        tb->eval();
        float want = f(a) + f(b);
        bool ok = std::isnan(f(a)) || std::isnan(f(b)) ? (tb->s == 0x7FC00000) : (tb->s == u(want));
        uint16_t hwant = f2h(h2f(ha) + h2f(hb));
        // A binary16 NaN operand: any NaN (its sign and payload are not kept).
        bool hnan = ((ha & 0x7C00) == 0x7C00 && (ha & 0x3FF)) || ((hb & 0x7C00) == 0x7C00 && (hb & 0x3FF));
        bool hok = hnan ? ((tb->hs & 0x7FFF) > 0x7C00) : tb->hs == hwant;
        if (!ok || !hok) {
            if (bad++ < 10)
                printf("f32 %08x + %08x: design %08x want %08x | f16 %04x + %04x: design %04x want %04x\n",
                       a, b, tb->s, u(want), ha, hb, tb->hs, hwant);
        }
        n++;
    }
    delete tb;
    delete ctx;
    if (bad) { printf("FAIL %ld of %ld\n", bad, n); return 1; }
    printf("ok %ld\n", n);
    return 0;
}
