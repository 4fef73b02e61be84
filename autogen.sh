#!/bin/sh
# SPDX-License-Identifier: BSD-2-Clause
# Generate configure and Makefile.in (needs autoconf, automake, libtool,
# autoconf-archive and pkg-config).
set -e
cd "$(dirname "$0")"
exec autoreconf -fi
