`timescale 1 ns / 1 ps
module conv2d_kernel_pe (ap_clk);
input ap_clk;
conv2d_kernel_fmul_32ns_32ns_32_4_max_dsp_1 fmul_32ns_32ns_32_4_max_dsp_1_U1 (.clk(ap_clk));
conv2d_kernel_fmul_32ns_32ns_32_4_max_dsp_1 fmul_32ns_32ns_32_4_max_dsp_1_U2 (.clk(ap_clk));
conv2d_kernel_fadd_32ns_32ns_32_5_full_dsp_1 fadd_32ns_32ns_32_5_full_dsp_1_U3 (.clk(ap_clk));
endmodule
