"""Store experiments beyond one run: reopen after a crash, local disk vs NFS vs HDFS, the peer
comparison with a server's own load tool, and the S4 thesis' figures."""
