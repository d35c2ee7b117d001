`timescale 1 ns / 1 ps
module conv2d_kernel_read_buf0_pad (ap_clk);
input ap_clk;
endmodule
