# The ganesha_shm extension is built by cargo (config.m4), through packaging/cargo-build.sh, the
# build every install route shares, for the php-config ./configure found. cargo decides what to
# rebuild, so the rule always runs it. Beside the shared object, the .la file libtool would
# write, which `make test` reads; make install copies modules/*.so and drops the .la.
$(phplibdir)/ganesha_shm.la: ganesha-shm-cargo-build
	@so=`PHP_CONFIG='$(GANESHA_SHM_PHP_CONFIG)' PHP='$(PHP_EXECUTABLE)' CARGO='$(CARGO)' \
		CARGO_TARGET_DIR='$(CARGO_TARGET_DIR)' LIBCLANG_PATH='$(LIBCLANG_PATH)' \
		/bin/sh '$(srcdir)/packaging/cargo-build.sh'` && \
	cp "$$so" '$(phplibdir)/ganesha_shm.so' && \
	printf "# ganesha_shm.la, written by Makefile.frag: the module is cargo's output\ndlname='ganesha_shm.so'\nlibrary_names='ganesha_shm.so'\n" > '$@' && \
	echo "Built $$so, copied to $(phplibdir)/ganesha_shm.so"

ganesha-shm-cargo-build:

.PHONY: ganesha-shm-cargo-build
