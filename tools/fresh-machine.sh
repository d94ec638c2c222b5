#!/usr/bin/env bash
# First contact on a fresh machine: a Debian 12 (bookworm) root built with debootstrap holding only
# git, make and ca-certificates; the repository cloned into it alone (its committed HEAD, nothing
# beside it); then `make demo`, `make demo` again (must be quick) and `make test`, as root and as a
# normal user with sudo, each pass in its own fresh copy of the root. Prints every command's exit
# code and wall time, and a summary at the end; exits non-zero if any command failed.
#
# Usage (as root on a Debian/Ubuntu host with network to a Debian mirror and PyPI):
#   tools/fresh-machine.sh [--pass root|user|both] [--work DIR] [--mirror URL] [--reuse-base] [--keep] [REPO]
#     REPO          the repository to clone (default /work/main); its HEAD commit is what is tested
#     --pass        which passes to run (default both: root first, then the sudo user)
#     --work DIR    where the roots and logs go (default /var/tmp/lazyfuel-fresh)
#     --mirror URL  the Debian mirror (default http://deb.debian.org/debian)
#     --reuse-base  reuse DIR/base from an earlier run instead of running debootstrap again
#     --keep        keep the pass roots afterwards (to look inside); the default removes them
#     --no-host-ca  do not give the roots the CA certificates this host trusts beyond Debian's
# Inside the roots the commands run with a clean environment (env -i): no pip configuration, no
# local wheel mirrors or caches of this host reach them; pip works against PyPI on its own. What
# the roots do take from this host is its network setup: /etc/resolv.conf, /etc/hosts, and the CA
# certificates it trusts that Debian's bundle lacks (a TLS-inspecting proxy's), as a machine on this
# network would need them.
set -euo pipefail
# The whole script is one { } block: bash reads all of it before running any of it, so editing the
# file while a run goes on (it takes a while) cannot change what that run does.
{

REPO=/work/main
WORK=/var/tmp/lazyfuel-fresh
MIRROR=http://deb.debian.org/debian
PASSES=(root user)
REUSE_BASE=0
KEEP=0
HOST_CA=1
SUITE=bookworm
USER_NAME=dev

usage() { awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --pass) case "${2:-}" in root) PASSES=(root) ;; user) PASSES=(user) ;; both) PASSES=(root user) ;;
              *) echo "fresh-machine: --pass takes root, user or both, not '${2:-}'" >&2; exit 2 ;; esac
            shift 2 ;;
    --work) WORK=${2:?--work needs a directory}; shift 2 ;;
    --mirror) MIRROR=${2:?--mirror needs a URL}; shift 2 ;;
    --reuse-base) REUSE_BASE=1; shift ;;
    --keep) KEEP=1; shift ;;
    --no-host-ca) HOST_CA=0; shift ;;
    -h|--help) usage 0 ;;
    -*) echo "fresh-machine: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) REPO=$1; shift ;;
  esac
done

[ "$(id -u)" = 0 ] || { echo "fresh-machine: must run as root (debootstrap, chroot and mounts need it)" >&2; exit 2; }
git -C "$REPO" rev-parse --git-dir >/dev/null 2>&1 || { echo "fresh-machine: '$REPO' is not a git repository" >&2; exit 2; }
COMMIT=$(git -C "$REPO" rev-parse HEAD)
WORK=$(mkdir -p "$WORK" && cd "$WORK" && pwd)
LOGS=$WORK/logs
mkdir -p "$LOGS"
if ! command -v debootstrap >/dev/null; then
  echo "== installing debootstrap on this host"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap
fi

MOUNTED=()   # roots whose /proc, /sys, /dev are mounted
SUMMARY=()
FAILED=0

mounts_under() { awk -v r="$1/" 'index($2, r) == 1 {print $2}' /proc/self/mounts; }

unmount_root() {  # unmount everything under root $1, deepest first; fail if anything stays
  local root=$1 m
  for m in $(mounts_under "$root" | sort -r); do umount "$m" 2>/dev/null || umount -l "$m" || true; done
  [ -z "$(mounts_under "$root")" ] || { echo "fresh-machine: mounts left under $root:" >&2; mounts_under "$root" >&2; return 1; }
}

remove_root() {  # delete root $1, only once nothing is mounted under it
  unmount_root "$1" && rm -rf --one-file-system "$1"
}

cleanup() {
  local root
  for root in "${MOUNTED[@]}"; do unmount_root "$root" || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mount_root() {  # what a chroot needs: /proc, /sys and /dev (with pts and shm), name resolution
  local root=$1
  mount -t proc proc "$root/proc"
  mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
  mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
  MOUNTED+=("$root")
  cp -L /etc/resolv.conf /etc/hosts "$root/etc/"
}

# trust_host_cas ROOT: the certificates of this host's CA bundle that ROOT's bundle lacks, added to
# ROOT's trust as local CAs (update-ca-certificates); prints how many.
trust_host_cas() {
  local root=$1 host_bundle=/etc/ssl/certs/ca-certificates.crt dir=$1/usr/local/share/ca-certificates
  [ -f "$host_bundle" ] || { echo 0; return; }
  awk -v dir="$dir" '
    FNR == 1 { file++ }
    /BEGIN CERTIFICATE/ { body = ""; pem = $0 "\n"; inside = 1; next }
    inside { pem = pem $0 "\n" }
    /END CERTIFICATE/ { inside = 0
      if (file == 1) known[body] = 1
      else if (!(body in known)) { n++; printf "%s", pem > (dir "/host-" n ".crt") }
      next }
    inside { body = body $0 }
    END { print n + 0 }' "$root/etc/ssl/certs/ca-certificates.crt" "$host_bundle"
  chroot "$root" update-ca-certificates >/dev/null 2>&1
}

# in_root ROOT UID HOME COMMAND: COMMAND under bash -c in ROOT as UID (its own group), with a clean
# environment.
in_root() {
  local root=$1 uid=$2 home=$3 cmd=$4 name
  name=$(chroot "$root" id -un "$uid")
  chroot --userspec="$uid:$uid" --groups="$uid" "$root" /usr/bin/env -i HOME="$home" USER="$name" LOGNAME="$name" \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 TERM=dumb \
    /bin/bash -c "$cmd"
}

# timed LABEL ROOT UID HOME COMMAND: run it, log its output, print and record its exit code and time.
timed() {
  local label=$1 root=$2 uid=$3 home=$4 cmd=$5 log rc start wall
  log=$LOGS/$(echo "$label" | tr ' /' '__').log
  echo "== [$label] \$ $cmd   (log: $log)"
  start=$(date +%s.%N)
  set +e
  in_root "$root" "$uid" "$home" "$cmd" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  set -e
  wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
  printf '== [%s] exit %d, wall %.1f s\n' "$label" "$rc" "$wall"
  SUMMARY+=("$(printf '%-28s exit %3d  wall %7.1f s' "$label" "$rc" "$wall")")
  [ "$rc" = 0 ] || FAILED=1
  return 0
}

# --- the base root: debootstrap minbase plus git, make and ca-certificates, nothing else ---------
BASE=$WORK/base
if [ "$REUSE_BASE" = 1 ] && [ -x "$BASE/usr/bin/git" ]; then
  echo "== reusing the base root $BASE"
else
  [ ! -e "$BASE" ] || remove_root "$BASE"
  mkdir -p "$WORK/debs"
  echo "== debootstrap $SUITE (minbase + git, make, ca-certificates) into $BASE from $MIRROR"
  start=$(date +%s)
  debootstrap --variant=minbase --include=git,make,ca-certificates --cache-dir="$WORK/debs" \
    "$SUITE" "$BASE" "$MIRROR" > "$LOGS/debootstrap.log" 2>&1 \
    || { tail -n 30 "$LOGS/debootstrap.log"; echo "fresh-machine: debootstrap failed (log: $LOGS/debootstrap.log)" >&2; exit 1; }
  echo "== debootstrap done in $(( $(date +%s) - start )) s"
fi
for tool in python3 g++ sudo; do
  if chroot "$BASE" /bin/sh -c "command -v $tool" >/dev/null; then
    echo "fresh-machine: the base root already has $tool: it is not a bare root" >&2; exit 1
  fi
done
echo "== base root: Debian $(cat "$BASE/etc/debian_version"), $(chroot "$BASE" dpkg-query -W | wc -l) packages, $(chroot "$BASE" git --version), $(chroot "$BASE" make --version | head -n1)"
echo "== testing $REPO at commit $COMMIT"

run_pass() {
  local pass=$1 root=$WORK/root-$1 uid home
  [ ! -e "$root" ] || remove_root "$root"
  echo "== pass '$pass': copying the base root to $root"
  cp -a "$BASE" "$root"
  mount_root "$root"
  [ "$HOST_CA" = 0 ] || echo "== pass '$pass': CA certificates of this host added to the root's trust: $(trust_host_cas "$root")"
  if [ "$pass" = root ]; then
    uid=0 home=/root
  else  # a normal user who may use sudo (without a password: nobody is there to type it)
    in_root "$root" 0 /root "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq sudo >/dev/null \
      && useradd -m -s /bin/bash $USER_NAME && echo '$USER_NAME ALL=(ALL) NOPASSWD:ALL' > /etc/sudoers.d/$USER_NAME \
      && chmod 440 /etc/sudoers.d/$USER_NAME" > "$LOGS/user-setup.log" 2>&1 \
      || { cat "$LOGS/user-setup.log"; echo "fresh-machine: could not add the sudo user" >&2; exit 1; }
    uid=$(chroot "$root" id -u "$USER_NAME") home=/home/$USER_NAME
  fi
  # the committed HEAD, cloned alone into the home directory: nothing beside it
  git clone -q --no-local "$REPO" "$root$home/lazyfuel"
  git -C "$root$home/lazyfuel" checkout -q --detach "$COMMIT"
  git -C "$root$home/lazyfuel" remote remove origin
  chroot "$root" chown -R "$uid:$uid" "$home/lazyfuel"  # useradd gave the user a group of the same id
  echo "== pass '$pass': beside the clone: $(ls -A "$root$home" | tr '\n' ' ')"
  echo "== pass '$pass': the commands run as $(in_root "$root" "$uid" "$home" \
    'printf "%s (uid %s)" "$(id -un)" "$(id -u)"; [ "$(id -u)" = 0 ] || { sudo -n true && printf ", sudo works"; }')"
  timed "$pass: make demo" "$root" "$uid" "$home" "cd ~/lazyfuel && make demo"
  timed "$pass: make demo (again)" "$root" "$uid" "$home" "cd ~/lazyfuel && make demo"
  timed "$pass: make test" "$root" "$uid" "$home" "cd ~/lazyfuel && make test"
  unmount_root "$root"
  if [ "$KEEP" = 1 ]; then echo "== pass '$pass': kept $root"; else remove_root "$root"; fi
}

for pass in "${PASSES[@]}"; do run_pass "$pass"; done

echo
echo "== summary: commit $COMMIT on Debian $(cat "$BASE/etc/debian_version") ($SUITE minbase + git, make, ca-certificates)"
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
}
