# Vitis HLS build of a hetero_dse design (csim, csynth, cosim, export, impl). Either launcher works:
#   vitis-run --mode hls --tcl run_hls.tcl     (2023.2 and later)
#   vitis_hls -f run_hls.tcl                   (before; deprecated from 2024.2)
# Every design-specific value (top, part, clock, files) is in project.tcl, generated next to this file, and
# the interface and clock settings shared with `v++ -c` are in hls_config.tcl. Pick steps with the
# HDSE_STEPS environment variable (`HDSE_STEPS="csim csynth"`) or, with vitis_hls, `-tclargs csim csynth`;
# default: all four.
set here [file dirname [info script]]
source [file join $here project.tcl]

set steps $argv
if {[info exists ::env(HDSE_STEPS)]} { set steps $::env(HDSE_STEPS) }
if {[llength $steps] == 0} { set steps {csim csynth cosim export} }

# HDSE_TOP: another top of the same source (a layer pipeline cut into kernels, one an SLR), in a project of its own
set prj prj
if {[info exists ::env(HDSE_TOP)]} { set top $::env(HDSE_TOP); set prj prj_$top }
open_project -reset $prj
set_top $top
add_files src/kernel.cpp -cflags "-std=c++14 -Isrc"
add_files -tb tb/tb.cpp -cflags "-std=c++14 -Isrc"
open_solution -reset solution1 -flow_target $flow_target
set_part $part
create_clock -period $clock_period_ns -name default
set_clock_uncertainty $clock_uncertainty
source [file join $here hls_config.tcl]

if {[lsearch $steps csim] >= 0}   { csim_design -argv [file normalize data] }
if {[lsearch $steps csynth] >= 0} { csynth_design }
if {[lsearch $steps cosim] >= 0}  { cosim_design -argv [file normalize data] }
if {[lsearch $steps export] >= 0} { export_design -format $export_format }
# place and route in Vivado for post-route timing and utilisation (impl/report/verilog/export_impl.rpt)
if {[lsearch $steps impl] >= 0}   { export_design -format $export_format -flow impl }
exit
