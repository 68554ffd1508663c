// list.h - the kernel's intrusive doubly linked list operations on struct
// list_head (the public header's type, which work_struct embeds), for the
// engine's worklists, idle lists and scheduled lists.
#pragma once

#include <cmwq/linux/workqueue.h>

namespace cmwq::detail {

inline void INIT_LIST_HEAD(list_head *l) { l->next = l->prev = l; }
inline bool list_empty(const list_head *l) { return l->next == l; }
inline void list_add_between(list_head *n, list_head *prev, list_head *next)
{
	next->prev = n;
	n->next = next;
	n->prev = prev;
	prev->next = n;
}
// Insert n before head (at the tail of the list headed by head).
inline void list_add_tail(list_head *n, list_head *head) { list_add_between(n, head->prev, head); }
inline void list_add(list_head *n, list_head *head) { list_add_between(n, head, head->next); }
inline void list_del_init(list_head *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	INIT_LIST_HEAD(e);
}
inline void list_move_tail(list_head *e, list_head *head)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
	list_add_tail(e, head);
}
inline work_struct *entry_work(list_head *e) { return container_of(e, work_struct, entry); }

} // namespace cmwq::detail
