// Test double of the standalone BSP's xil_printf.h: printf (host/zynq/main.cpp compiled here).
#ifndef HDSE_STANDIN_XIL_PRINTF_H
#define HDSE_STANDIN_XIL_PRINTF_H
#include <cstdio>
#define xil_printf std::printf
#endif
