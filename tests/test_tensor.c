#include "test.h"
static void test_placeholder(void) { CHECK(1); }
int main(void) { RUN(test_placeholder); return test_report(); }
