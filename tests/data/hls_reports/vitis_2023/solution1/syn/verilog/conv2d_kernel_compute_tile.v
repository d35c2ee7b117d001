`timescale 1 ns / 1 ps
module conv2d_kernel_compute_tile (ap_clk);
input ap_clk;
conv2d_kernel_pe grp_pe_fu_100 (.ap_clk(ap_clk));
conv2d_kernel_pe grp_pe_fu_101 (.ap_clk(ap_clk));
conv2d_kernel_pe grp_pe_fu_102 (.ap_clk(ap_clk));
conv2d_kernel_mul_32s_32s_32_2_1 mul_32s_32s_32_2_1_U5 (.clk(ap_clk));
endmodule
