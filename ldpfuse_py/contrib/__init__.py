"""File systems maintained with ldpfuse-py, for stores people already use.

``ldpfuse_py.contrib.fsspec:FsspecFS`` mounts any fsspec URL (S3, GCS, Azure, HDFS, memory,
local): ``ldpfuse-run --mountpoint /mnt/data ldpfuse_py.contrib.fsspec:FsspecFS s3://bucket``.
"""
