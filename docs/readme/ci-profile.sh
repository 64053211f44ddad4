# perfscope profile: the symbolization and profiling tests compile small C
# programs with gcc (dlfcn.h, time.h from libc6-dev) and drop privileges
# with setpriv (util-linux) to check the unprivileged exit code.
apt-get install -y --no-install-recommends gcc libc6-dev util-linux
