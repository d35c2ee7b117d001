// Modelled on Vitis HLS output for the tests (not from a real run): the top with its m_axi ports and the
// dataflow processes.
`timescale 1 ns / 1 ps
module conv2d_kernel (
        ap_clk,
        ap_rst_n,
        m_axi_gmem0_RDATA,
        m_axi_gmem0_ARADDR,
        m_axi_gmem1_RDATA,
        m_axi_gmem2_WDATA,
        m_axi_gmem2_RDATA
);
input   ap_clk;
input   ap_rst_n;
input  [511:0] m_axi_gmem0_RDATA;
output  [63:0] m_axi_gmem0_ARADDR;
input  [31:0] m_axi_gmem1_RDATA;
output  [511:0] m_axi_gmem2_WDATA;
input  [511:0] m_axi_gmem2_RDATA;

conv2d_kernel_read_buf0_pad read_buf0_pad_U0 (.ap_clk(ap_clk));
conv2d_kernel_compute_tile compute_tile_U0 (.ap_clk(ap_clk));
conv2d_kernel_buf0_pad_s_RAM_2P_BRAM_1R1W buf0_pad_s_U (.clk(ap_clk));
conv2d_kernel_buf0_pad_s_RAM_2P_BRAM_1R1W buf0_pad_s_1_U (.clk(ap_clk));
endmodule
