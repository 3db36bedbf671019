# shellcheck shell=bash
# Sourced by the job scripts: deck_ranks KPIPE DECK [ARG ...] prints the MPI
# rank count the deck asks for, p * t * d (pipeline.stages *
# pipeline.tensor_parallel * pipeline.data_parallel), with the command line's
# deck overrides applied, so the deck alone decides the layout. A deck kpipe
# refuses ends the caller with kpipe's one line and exit code 2.
deck_ranks() {
  local kpipe=$1 deck=$2
  shift 2
  # Only deck keys (section.key=value) decide the layout; options (--json FILE)
  # and a command's own words (prompt=, requests=) are kpipe's to read.
  local word deck_keys=()
  for word in "$@"; do
    if [[ $word =~ ^[A-Za-z_]+\.[A-Za-z_.]+= ]]; then deck_keys+=("$word"); fi
  done
  local summary
  summary=$("$kpipe" deck "$deck" "${deck_keys[@]}") || exit $?
  sed -n 's/.*(world size \([0-9]*\)).*/\1/p' <<<"$summary"
}
