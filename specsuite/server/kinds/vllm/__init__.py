"""vLLM, whole in this folder: its client (`client`) with its /v1/completions wire (`wire`) and native adapter
(`native_adapter`), launch command and patches (`launch`, `patches`), integrity rules and checking client
(`integrity_rules`, `checking`), serving-bench stream reader (`bench_stream`) and its `ServerKind` entry
(`kind.VLLM`, registered in specsuite/server/kinds/__init__.py)."""
