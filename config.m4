dnl The ganesha_shm extension is written in Rust: `phpize && ./configure && make && make install`
dnl builds it with cargo, as docker-php-ext-install and PECL-style source builds run it.
dnl
dnl ./configure checks what the build needs and stops with a message naming what is missing:
dnl cargo >= 1.85, libclang (bindgen reads PHP's headers with it) and the PHP CLI of the
dnl php-config it found (ext-php-rs runs it). make runs packaging/cargo-build.sh, the build every
dnl install route shares (Makefile.frag), for that php-config, and copies the shared object to
dnl modules/ganesha_shm.so; make install puts it in `php-config --extension-dir`.
dnl
dnl Settings, read by ./configure: CARGO (the cargo to run), CARGO_TARGET_DIR (where cargo
dnl builds; default target/ here), LIBCLANG_PATH (the directory holding libclang.so).

PHP_ARG_ENABLE([ganesha_shm],
  [whether to enable the ganesha_shm extension],
  [AS_HELP_STRING([--disable-ganesha_shm], [Do not build the ganesha_shm extension (Rust, built with cargo)])],
  [yes])

AC_ARG_VAR([CARGO], [cargo, Rust's build tool (default: cargo on PATH, else ~/.cargo/bin/cargo)])
AC_ARG_VAR([CARGO_TARGET_DIR], [where cargo builds (default: target/ in the source directory)])
AC_ARG_VAR([LIBCLANG_PATH], [the directory holding libclang.so, for bindgen])

if test "$PHP_GANESHA_SHM" != "no"; then
  ganesha_shm_rustup="install Rust >= 1.85 with rustup (https://rustup.rs): curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal; Debian 12's own cargo, 1.65, is too old"

  dnl cargo: CARGO, else PATH, else where rustup installs it
  AC_MSG_CHECKING([for cargo >= 1.85])
  if test -z "$CARGO"; then
    for ganesha_shm_dir in `echo "$PATH" | tr ':' ' '` "${CARGO_HOME:-$HOME/.cargo}/bin" "$HOME/.cargo/bin"; do
      if test -x "$ganesha_shm_dir/cargo" && test ! -d "$ganesha_shm_dir/cargo"; then
        CARGO="$ganesha_shm_dir/cargo"
        break
      fi
    done
  fi
  if test -z "$CARGO"; then
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([cargo (Rust) was not found on PATH nor in ~/.cargo/bin: $ganesha_shm_rustup; or set CARGO=/path/to/cargo])
  fi
  ganesha_shm_cargo_version=`"$CARGO" --version 2>/dev/null | sed -n 's/^cargo \([[0-9]]*\.[[0-9]]*\.[[0-9]]*\).*/\1/p'`
  if test -z "$ganesha_shm_cargo_version"; then
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([$CARGO --version did not print a cargo version: $ganesha_shm_rustup])
  fi
  ganesha_shm_major=`echo "$ganesha_shm_cargo_version" | cut -d. -f1`
  ganesha_shm_minor=`echo "$ganesha_shm_cargo_version" | cut -d. -f2`
  if test "$ganesha_shm_major" -lt 1 || { test "$ganesha_shm_major" -eq 1 && test "$ganesha_shm_minor" -lt 85; }; then
    AC_MSG_RESULT([no, $CARGO is $ganesha_shm_cargo_version])
    AC_MSG_ERROR([cargo $ganesha_shm_cargo_version ($CARGO) is too old: the extension needs Rust >= 1.85 (rustup update stable, or $ganesha_shm_rustup)])
  fi
  AC_MSG_RESULT([$CARGO ($ganesha_shm_cargo_version)])

  dnl the PHP CLI of php-config, which ext-php-rs runs (php -i) while building
  AC_MSG_CHECKING([for the PHP CLI of $PHP_CONFIG])
  if test -z "$PHP_EXECUTABLE" || test ! -x "$PHP_EXECUTABLE"; then
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([$PHP_CONFIG --php-binary names ${PHP_EXECUTABLE:-nothing}, which is not an executable: ext-php-rs runs that PHP to build the extension; install its CLI (apt-get install php`$PHP_CONFIG --version | cut -d. -f1,2`-cli)])
  fi
  AC_MSG_RESULT([$PHP_EXECUTABLE])
  ganesha_shm_php_config=$PHP_CONFIG
  case $ganesha_shm_php_config in
    */*) ;;
    *) ganesha_shm_php_config=`command -v "$ganesha_shm_php_config"` ;;
  esac

  dnl libclang, which bindgen loads to read PHP's headers (on Linux; clang-sys finds Xcode's elsewhere)
  AC_MSG_CHECKING([for libclang])
  ganesha_shm_libclang=
  ganesha_shm_clang_hint="install it (apt-get install libclang-dev clang; dnf install clang-devel), or set LIBCLANG_PATH to the directory holding libclang.so"
  if test -n "$LIBCLANG_PATH"; then
    for ganesha_shm_file in "$LIBCLANG_PATH" "$LIBCLANG_PATH"/libclang*.so*; do
      test -f "$ganesha_shm_file" && ganesha_shm_libclang=$ganesha_shm_file && break
    done
    if test -z "$ganesha_shm_libclang"; then
      AC_MSG_RESULT([no])
      AC_MSG_ERROR([LIBCLANG_PATH=$LIBCLANG_PATH holds no libclang*.so: $ganesha_shm_clang_hint])
    fi
  elif test "`uname -s`" = "Linux"; then
    for ganesha_shm_ldconfig in /sbin/ldconfig /usr/sbin/ldconfig; do
      if test -x "$ganesha_shm_ldconfig"; then
        ganesha_shm_libclang=`$ganesha_shm_ldconfig -p 2>/dev/null | sed -n 's/^[[[:space:]]]*\(libclang[[-.0-9]]*\.so[[.0-9]]*\) .*=> \(.*\)$/\2/p' | head -n 1`
        break
      fi
    done
    if test -z "$ganesha_shm_libclang"; then
      for ganesha_shm_file in /usr/lib/llvm-*/lib/libclang*.so* /usr/lib/*-linux-gnu/libclang*.so* /usr/lib64/libclang*.so* /usr/lib/libclang*.so* /usr/local/lib/libclang*.so*; do
        test -f "$ganesha_shm_file" && ganesha_shm_libclang=$ganesha_shm_file && break
      done
    fi
    if test -z "$ganesha_shm_libclang"; then
      AC_MSG_RESULT([no])
      AC_MSG_ERROR([libclang was not found (bindgen needs it to read PHP's headers): $ganesha_shm_clang_hint])
    fi
  else
    ganesha_shm_libclang="not checked on `uname -s`"
  fi
  AC_MSG_RESULT([$ganesha_shm_libclang])

  dnl No C sources: the module is cargo's output, with the .la file libtool would write beside it,
  dnl which `make test` reads; make install copies modules/*.so and drops the .la.
  PHP_MODULES='$(phplibdir)/ganesha_shm.la'
  dnl configure creates the build directories of the extension's sources: here modules/ alone
  PHP_ADD_BUILD_DIR([modules])
  GANESHA_SHM_PHP_CONFIG=$ganesha_shm_php_config
  PHP_SUBST(GANESHA_SHM_PHP_CONFIG)
  PHP_SUBST(CARGO)
  dnl given to configure, they are kept in the Makefile; else make passes on its environment's
  if test -n "$CARGO_TARGET_DIR"; then
    PHP_SUBST(CARGO_TARGET_DIR)
  fi
  if test -n "$LIBCLANG_PATH"; then
    PHP_SUBST(LIBCLANG_PATH)
  fi
  PHP_ADD_MAKEFILE_FRAGMENT([$abs_srcdir/Makefile.frag], [$abs_srcdir], [$abs_builddir])
fi
