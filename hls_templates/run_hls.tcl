# Vitis HLS build of a hetero_dse design: `vitis_hls -f run_hls.tcl` (csim, csynth, cosim, export).
# Every design-specific value (top, part, clock, files) is in project.tcl, generated next to this file;
# pick steps with `vitis_hls -f run_hls.tcl -tclargs csim csynth` (default: all four).
source [file join [file dirname [info script]] project.tcl]

set steps $argv
if {[llength $steps] == 0} { set steps {csim csynth cosim export} }

open_project -reset prj
set_top $top
add_files src/kernel.cpp -cflags "-std=c++14 -Isrc"
add_files -tb tb/tb.cpp -cflags "-std=c++14 -Isrc"
open_solution -reset solution1 -flow_target $flow_target
set_part $part
create_clock -period $clock_period_ns -name default

if {[lsearch $steps csim] >= 0}   { csim_design -argv [file normalize data] }
if {[lsearch $steps csynth] >= 0} { csynth_design }
if {[lsearch $steps cosim] >= 0}  { cosim_design -argv [file normalize data] }
if {[lsearch $steps export] >= 0} { export_design -format $export_format }
exit
