#include "textflag.h"

// LANES adds n 32-bit lanes of s into d with the packed instruction OP
// (ADDPS or PADDL), sixteen lanes a loop, then four, then one with the
// SCALAR_OP on the low lane (MOVSS loads zero the others; PADDL serves
// as its own scalar form). The destination operand is d, as in the Go statement
// d[i] += s[i], so even a NaN's payload comes out as the scalar code's.
#define LANES(OP, SCALAR_OP) \
	MOVQ d+0(FP), DI \
	MOVQ s+8(FP), SI \
	MOVQ n+16(FP), CX \
loop16: \
	CMPQ CX, $16 \
	JLT loop4 \
	MOVUPS 0(DI), X0 \
	MOVUPS 16(DI), X1 \
	MOVUPS 32(DI), X2 \
	MOVUPS 48(DI), X3 \
	MOVUPS 0(SI), X4 \
	MOVUPS 16(SI), X5 \
	MOVUPS 32(SI), X6 \
	MOVUPS 48(SI), X7 \
	OP X4, X0 \
	OP X5, X1 \
	OP X6, X2 \
	OP X7, X3 \
	MOVUPS X0, 0(DI) \
	MOVUPS X1, 16(DI) \
	MOVUPS X2, 32(DI) \
	MOVUPS X3, 48(DI) \
	ADDQ $64, DI \
	ADDQ $64, SI \
	SUBQ $16, CX \
	JMP loop16 \
loop4: \
	CMPQ CX, $4 \
	JLT tail \
	MOVUPS 0(DI), X0 \
	MOVUPS 0(SI), X4 \
	OP X4, X0 \
	MOVUPS X0, 0(DI) \
	ADDQ $16, DI \
	ADDQ $16, SI \
	SUBQ $4, CX \
	JMP loop4 \
tail: \
	TESTQ CX, CX \
	JZ done \
	MOVSS 0(DI), X0 \
	MOVSS 0(SI), X4 \
	SCALAR_OP X4, X0 \
	MOVSS X0, 0(DI) \
	ADDQ $4, DI \
	ADDQ $4, SI \
	DECQ CX \
	JMP tail \
done: \
	RET

// func addF32(d, s *float32, n int)
TEXT ·addF32(SB), NOSPLIT, $0-24
	LANES(ADDPS, ADDSS)

// func addU32(d, s *uint32, n int)
TEXT ·addU32(SB), NOSPLIT, $0-24
	LANES(PADDL, PADDL)
