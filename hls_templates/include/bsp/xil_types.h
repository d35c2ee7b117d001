// Test double of the standalone BSP's xil_types.h, for compiling the Zynq host program (host/zynq/main.cpp) here.
#ifndef HDSE_STANDIN_XIL_TYPES_H
#define HDSE_STANDIN_XIL_TYPES_H
#include <cstdint>
typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef uintptr_t UINTPTR;
typedef intptr_t INTPTR;
#endif
