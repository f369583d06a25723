"""Benchmarks: corpora (bench.corpora), engine throughput (bench.engine), service and trainer benches."""
