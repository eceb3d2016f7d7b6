"""SGLang, whole in this folder: its client (`client`), launch command (`launch`), integrity rules and checking
client (`integrity_rules`, `checking`), serving-bench stream reader (`bench_stream`) and its `ServerKind` entry
(`kind.SGLANG`, registered in specsuite/server/kinds/__init__.py)."""
