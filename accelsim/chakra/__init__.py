"""MLCommons Chakra execution traces in and out: an engine prediction's per-rank op graphs
written as Chakra ET files (:func:`accelsim.chakra.export.write_chakra`, ``--chakra DIR``), and
a directory of Chakra traces timed by netsim and placed by the engine's scheduler
(:func:`accelsim.chakra.export.predict_chakra`, ``--workload chakra:DIR``). The wire format is
a small hand-written protobuf codec of Chakra's ``et_def.proto`` (:mod:`accelsim.chakra.codec`;
docs/chakra.md)."""
