/*
 * A QEMU 7.2 TCG plugin (plugin API version 1) that counts the guest's instructions exactly
 * and prints the count each time the guest executes the marker instruction
 * `nopl 0x54455353(%rax)` (0f 1f 80 53 53 45 54), as "MARK <count>" in QEMU's log
 * (`-d plugin -D FILE`). udp.c executes the marker beside each of its readings, so the
 * difference of two marks is every instruction the guest ran between them, idle loop included;
 * a halted CPU runs none.
 *
 * QEMU's Debian package does not install qemu-plugin.h: the few declarations used are below,
 * as QEMU 7.2 defines them.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

typedef uint64_t qemu_plugin_id_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;
typedef struct qemu_info_t qemu_info_t;
enum qemu_plugin_op { QEMU_PLUGIN_INLINE_ADD_U64 };
enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS };
typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
const void *qemu_plugin_insn_data(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
void qemu_plugin_register_vcpu_insn_exec_inline(struct qemu_plugin_insn *insn,
						enum qemu_plugin_op op, void *ptr, uint64_t imm);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn,
					    qemu_plugin_vcpu_udata_cb_t cb,
					    enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_outs(const char *string);

__attribute__((visibility("default"))) int qemu_plugin_version = 1;

static const unsigned char marker[] = {0x0f, 0x1f, 0x80, 0x53, 0x53, 0x45, 0x54};
static uint64_t count; /* one vCPU */

static void mark(unsigned int vcpu_index, void *userdata)
{
	char line[64];
	(void)vcpu_index;
	(void)userdata;
	snprintf(line, sizeof line, "MARK %" PRIu64 "\n", count);
	qemu_plugin_outs(line);
}

static void translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
	(void)id;
	for (size_t i = 0; i < qemu_plugin_tb_n_insns(tb); i++) {
		struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
		qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &count, 1);
		if (qemu_plugin_insn_size(insn) == sizeof marker &&
		    memcmp(qemu_plugin_insn_data(insn), marker, sizeof marker) == 0)
			qemu_plugin_register_vcpu_insn_exec_cb(insn, mark, QEMU_PLUGIN_CB_NO_REGS, NULL);
	}
}

__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
							       const qemu_info_t *info, int argc,
							       char **argv)
{
	(void)info;
	(void)argc;
	(void)argv;
	qemu_plugin_register_vcpu_tb_trans_cb(id, translate);
	return 0;
}
