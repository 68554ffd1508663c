/*
 * old_includes.c - a C program written against the previous release's
 * headers: it reaches the control endpoint's calls through <cmwq/stats.h>,
 * where they were declared before <cmwq/control.h>. Built with
 * -Werror=implicit-function-declaration, so a declaration that stops being
 * reachable from its old header fails the build instead of truncating a
 * pointer at run time.
 */
#include <cmwq/stats.h>

#include <stdio.h>

int main(void)
{
	const char *path = cmwq_control_path();
	printf("old_includes: control path %s\n", path ? path : "(not running)");
	return path == NULL ? 0 : 1;
}
