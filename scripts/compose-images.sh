# Sourced (not run) by the scripts that bring docker/compose.yaml up: where the official
# broker and store images (rabbitmq:4.3, dxflrs/garage:v2.5.0) are not on this machine but
# the local stand-ins are (scripts/docker-images.sh builds them from docker/local/ under
# tessera-local/ names where no registry answers), compose is pointed at the stand-ins
# through RABBITMQ_IMAGE and GARAGE_IMAGE. Why: a stand-in must not take a public name, where
# it would pass for the official image (review: local images shadowing public names).
#
#   . scripts/compose-images.sh && tessera_service_images
#
# Each official image and its stand-in are an explicit pair: the broker's stand-in is Debian
# 13's rabbitmq-server 4.0 (the newest 4.x in Debian's archive) with the deprecated features
# 4.3 denies by default denied (docker/local/rabbitmq-entrypoint.sh), so its tag is not the
# official one's.
# $tessera_rabbitmq_official must be compose.yaml's default for RABBITMQ_IMAGE.
# shellcheck shell=bash
tessera_rabbitmq_official=rabbitmq:4.3
tessera_rabbitmq_stand_in=tessera-local/rabbitmq:4.0
tessera_service_images() {
  local pair garage=dxflrs/garage:v${GARAGE_VERSION:-2.5.0}
  for pair in "RABBITMQ_IMAGE $tessera_rabbitmq_official $tessera_rabbitmq_stand_in" \
              "GARAGE_IMAGE $garage tessera-local/${garage##*/}"; do
    set -- $pair
    if [[ -z ${!1:-} ]] && ! docker image inspect "$2" >/dev/null 2>&1 \
       && docker image inspect "$3" >/dev/null 2>&1; then
      export "$1=$3"
    fi
  done
}
