#!/usr/bin/env bash
# Install the real servers without starting them (idempotent; cached in the user caches):
#   redis: apt-get install redis-server redis-tools     (needs root)
#   minio: go install github.com/minio/minio@<pin>      (needs Go >= 1.24; ~4 min the first time)
#   hdfs:  Maven Central jars                            (see services/hdfs.py)
#   hbase: Maven Central jars                            (see services/hbase.py)
# Usage: scripts/install_servers.sh [redis] [minio] [hdfs] [hbase]   (default: all)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export PATH="$PATH:/usr/local/go/bin"
exec "$ROOT/.venv/bin/python" -c '
import sys
import services
try:
    services.install(sys.argv[1:] or None)
except services.ServiceError as exc:
    sys.exit(f"install_servers: {exc}")
' "$@"
