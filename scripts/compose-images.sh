# Sourced (not run) by the scripts that bring docker/compose.yaml up: where the official
# broker and store images (rabbitmq:3.10, dxflrs/garage:v2.5.0) are not on this machine but
# the local stand-ins are (scripts/docker-images.sh builds them from docker/local/ under
# tessera-local/ names where no registry answers), compose is pointed at the stand-ins
# through RABBITMQ_IMAGE and GARAGE_IMAGE. Why: a stand-in must not take a public name, where
# it would pass for the official image (review: local images shadowing public names).
#
#   . scripts/compose-images.sh && tessera_service_images
tessera_service_images() {
  local official stand_in
  for pair in "RABBITMQ_IMAGE rabbitmq:3.10" "GARAGE_IMAGE dxflrs/garage:v${GARAGE_VERSION:-2.5.0}"; do
    set -- $pair
    official=$2
    stand_in=tessera-local/${official##*/}
    if [[ -z ${!1:-} ]] && ! docker image inspect "$official" >/dev/null 2>&1 \
       && docker image inspect "$stand_in" >/dev/null 2>&1; then
      export "$1=$stand_in"
    fi
  done
}
