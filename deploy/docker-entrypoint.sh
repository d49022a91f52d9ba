#!/bin/sh
# Container entrypoint: apply migrations (idempotent), then serve. Arguments go to
# `syntic serve`. Set SYNTIC_MIGRATE_ON_START=0 where a separate job migrates (Kubernetes,
# the compose file's `migrate` service) so replicas do not race on startup.
set -eu
if [ "${SYNTIC_MIGRATE_ON_START:-1}" = "1" ]; then
  syntic migrate
fi
exec syntic serve "$@"
