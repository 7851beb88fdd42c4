//go:build !purego

#include "textflag.h"

// func scanCandidates(t *scanTables, s string, i int) (pos int, mask uint32)
TEXT ·scanCandidates(SB), NOSPLIT, $0-44
	MOVQ t+0(FP), AX
	MOVQ s_base+8(FP), SI
	MOVQ s_len+16(FP), DX
	MOVQ i+24(FP), CX
	VMOVDQU 0(AX), Y8    // separators: low-nibble table
	VMOVDQU 32(AX), Y9   // separators: high-nibble table
	VMOVDQU 64(AX), Y10  // first bytes
	VMOVDQU 96(AX), Y11
	VMOVDQU 128(AX), Y12 // second bytes
	VMOVDQU 160(AX), Y13
	// Only VEX instructions from here: a legacy SSE one (MOVQ to an X
	// register) with the upper halves in use cost 120 ns a call.
	VMOVDQU 192(AX), Y14 // 0x0f in every byte
	VPXOR Y15, Y15, Y15

loop:
	// Positions i..i+31 need their next byte too: 33 bytes.
	MOVQ CX, BX
	ADDQ $33, BX
	CMPQ BX, DX
	JGT  done
	VMOVDQU (SI)(CX*1), Y0  // the byte at each position
	VMOVDQU 1(SI)(CX*1), Y1 // the byte after it
	VPSRLW  $4, Y0, Y2
	VPAND   Y14, Y2, Y2     // high nibbles
	VPAND   Y14, Y0, Y3     // low nibbles
	VPSHUFB Y3, Y8, Y4
	VPSHUFB Y2, Y9, Y5
	VPAND   Y4, Y5, Y4      // nonzero: a separator
	VPSHUFB Y3, Y10, Y5
	VPSHUFB Y2, Y11, Y6
	VPAND   Y5, Y6, Y5      // nonzero: a first byte
	VPSRLW  $4, Y1, Y2
	VPAND   Y14, Y2, Y2
	VPAND   Y14, Y1, Y3
	VPSHUFB Y3, Y12, Y6
	VPSHUFB Y2, Y13, Y7
	VPAND   Y6, Y7, Y6      // nonzero: followed by a second byte
	VPCMPEQB Y15, Y5, Y5
	VPCMPEQB Y15, Y6, Y6
	VPOR    Y5, Y6, Y5      // 0xff: no first-and-second pair
	VPCMPEQB Y15, Y4, Y4    // 0xff: no separator
	VPAND   Y4, Y5, Y4      // 0xff: no candidate
	VPMOVMSKB Y4, BX
	NOTL    BX
	TESTL   BX, BX
	JNZ     found
	ADDQ    $32, CX
	JMP     loop

found:
	VZEROUPPER
	MOVQ CX, pos+32(FP)
	MOVL BX, mask+40(FP)
	RET

done:
	VZEROUPPER
	MOVQ CX, pos+32(FP)
	MOVL $0, mask+40(FP)
	RET
