# Sourced by the integration test scripts: counts checks and prints the
# closing line.  report NAME STATUS [DETAIL]; finish (exits non-zero on a failure).
passed=0
failed=0
report() {
  if [ "$2" -eq 0 ]; then
    echo "PASS: $1${3:+ ($3)}"
    passed=$((passed + 1))
  else
    echo "FAIL: $1${3:+ ($3)}"
    failed=$((failed + 1))
  fi
}
finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
