// Test double of the standalone BSP's xstatus.h (host/zynq/main.cpp compiled here).
#ifndef HDSE_STANDIN_XSTATUS_H
#define HDSE_STANDIN_XSTATUS_H
#define XST_SUCCESS 0L
#define XST_FAILURE 1L
#endif
