"""A whole ``explore`` run, operator × target: search, write, fuse, synthesize, report (:mod:`.engine`), its
output directory (:mod:`.outdir`), what it tells the caller as it goes (:mod:`.events`) and the synthesis of
its best designs (:mod:`.synth`)."""
