/* The program's list: the kernel's names over liburcu's list. */
#ifndef _LINUX_LIST_H
#define _LINUX_LIST_H

#include <urcu/list.h>

#define list_head cds_list_head
#define LIST_HEAD_INIT(l) CDS_LIST_HEAD_INIT(l)
#define LIST_HEAD(l) CDS_LIST_HEAD(l)
#define INIT_LIST_HEAD(l) CDS_INIT_LIST_HEAD(l)
#define list_add(n, h) cds_list_add(n, h)
#define list_add_tail(n, h) cds_list_add_tail(n, h)
#define list_del(l) cds_list_del(l)
#define list_del_init(l) cds_list_del_init(l)
#define list_empty(l) cds_list_empty(l)
#define list_entry(p, t, m) cds_list_entry(p, t, m)
#define list_for_each_entry(p, h, m) cds_list_for_each_entry(p, h, m)

#endif
