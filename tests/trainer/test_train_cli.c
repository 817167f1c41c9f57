// SPDX-License-Identifier: MIT
// needs-rdps-tool
/*
 * rdps train as a DGL-KE user meets it, through the tool: a dglke_train
 * command line on a raw_udd_hrt dataset with its own delimiter runs with
 * only the command name changed; a mistyped option is one line with a
 * did-you-mean; GPU flags say why they cannot apply; --check-only checks
 * without training; a save path that cannot be written is refused before
 * training; SIGINT saves the embeddings reached and says where; progress
 * lines carry elapsed time and an ETA, evaluation reports progress, the
 * metrics also go to results.json and config.json has DGL-KE's keys with
 * the numbers as DGL-KE writes them.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rdps/trainer.h"
#include "rdps_test.h"

/* Every run here takes seconds; waits past this are failures. */
#define PROC_WAIT_MS 60000

static char *dir, *data;

static char *path(const char *name)
{
	char *p;

	cr_assert(asprintf(&p, "%s/%s", dir, name) > 0);
	return p;
}

static void setup(void)
{
	dir = rdps_test_tmpdir("train-cli");
	cr_assert(dir);
	data = path("kg");
	rdps_test_synth_kg(data, 1000, 12, 12000, 0, NULL, 0);
}

static void teardown(void)
{
	rdps_test_rmtree(dir);
	free(dir);
	free(data);
}

TestSuite(train_cli, .init = setup, .fini = teardown, .timeout = 180);

/* Runs rdps train with args (NULL-ended) to completion (bounded); returns
 * its output (stdout and stderr), *code its exit code. */
static char *run(const char *name, char *const args[], int *code)
{
	char *argv[64] = { RDPS_BIN, "train" }, *log = NULL, *text;
	int n = 2, st = 0;
	pid_t pid;

	for (int i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert(asprintf(&log, "%s/%s.log", dir, name) > 0);
	pid = rdps_test_spawn(argv, log);
	cr_assert_gt(pid, 0);
	cr_assert_eq(rdps_test_wait(pid, PROC_WAIT_MS, &st), 0, "still running after %d s: %s",
		     PROC_WAIT_MS / 1000, log);
	cr_assert(WIFEXITED(st), "died of signal %d", WTERMSIG(st));
	*code = WEXITSTATUS(st);
	text = rdps_test_slurp(log);
	cr_assert(text, "%s", log);
	free(log);
	return text;
}

static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* A mistyped option: one line naming it, the option meant and where to
 * look (it used to print the whole usage, 60 lines). */
Test(train_cli, a_mistyped_option_is_one_line_with_did_you_mean)
{
	char *args[] = { "--data", data, "--hiden_dim", "16", "--test", NULL };
	char *args2[] = { "--data", data, "-neg_sample", "16", NULL };
	int code;
	char *out = run("typo", args, &code);

	cr_assert_eq(code, 2, "%s", out);
	cr_assert_eq(count_lines(out), 1, "%s", out);
	cr_assert(strstr(out, "unknown option '--hiden_dim' (did you mean --hidden_dim?) (see rdps "
			      "train --help)"), "%s", out);
	free(out);
	out = run("ambiguous", args2, &code);
	cr_assert_eq(code, 2, "%s", out);
	cr_assert_eq(count_lines(out), 1, "%s", out);
	cr_assert(strstr(out, "could be --neg_sample_size, --neg_sample_size_eval"), "%s", out);
	free(out);
}

/* GPU flags cannot apply: each says why; DGL-KE's --gpu -1 (the CPU) is
 * accepted. */
Test(train_cli, gpu_flags_say_why_they_cannot_apply)
{
	char *gpu[] = { "--data", data, "--gpu", "0", "1", NULL };
	char *mix[] = { "--data", data, "--mix_cpu_gpu", NULL };
	char *part[] = { "--data", data, "--rel_part", NULL };
	char *cpu[] = { "--data", data, "--gpu", "-1", "--check-only", NULL };
	int code;
	char *out = run("gpu", gpu, &code);

	cr_assert_eq(code, 2, "%s", out);
	cr_assert(strstr(out, "--gpu 0: rdps trains on CPU threads only"), "%s", out);
	free(out);
	out = run("mix", mix, &code);
	cr_assert_eq(code, 2, "%s", out);
	cr_assert(strstr(out, "--mix_cpu_gpu: rdps trains on CPU threads only"), "%s", out);
	free(out);
	out = run("relpart", part, &code);
	cr_assert_eq(code, 2, "%s", out);
	cr_assert(strstr(out, "--rel_part: relation partitioning is DGL-KE's multi-GPU"), "%s", out);
	free(out);
	out = run("cpu", cpu, &code);
	cr_assert_eq(code, 0, "%s", out);
	free(out);
}

/* --check-only: options, data and save path, nothing trained; a damaged
 * dataset and an unwritable save path exit 2 naming them. */
Test(train_cli, check_only_checks_without_training)
{
	char *file = rdps_test_write(dir, "plainfile", "x\n"), *save, *bad = path("bad-kg");
	char *ok[] = { "--data", data, "--test", "--check-only", "--save_path", NULL, NULL };
	char *badsave[] = { "--data", data, "--check-only", "--save_path", NULL, NULL };
	char *baddata[] = { "--data", bad, "--check-only", NULL };
	int code;
	char *out;

	save = path("ck-save");
	ok[5] = save;
	out = run("check-ok", ok, &code);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert(strstr(out, "--check-only: options, data, save path are fine"), "%s", out);
	cr_assert_null(strstr(out, "step"), "%s", out);
	cr_assert_null(strstr(out, "Test average"), "%s", out);
	free(out);
	cr_assert(asprintf(&badsave[4], "%s/sub", file) > 0);
	out = run("check-badsave", badsave, &code);
	cr_assert_eq(code, 2, "%s", out);
	cr_assert(strstr(out, "--save_path") && strstr(out, "plainfile/sub"), "%s", out);
	free(out);
	/* a dataset whose train.txt names an entity not in entities.dict */
	cr_assert_eq(mkdir(bad, 0755), 0);
	free(rdps_test_write(bad, "entities.dict", "0\ta\n1\tb\n"));
	free(rdps_test_write(bad, "relations.dict", "0\tr\n"));
	free(rdps_test_write(bad, "train.txt", "a\tr\tb\nb\tr\tc\n"));
	free(rdps_test_write(bad, "valid.txt", ""));
	free(rdps_test_write(bad, "test.txt", ""));
	out = run("check-baddata", baddata, &code);
	cr_assert_eq(code, 2, "%s", out);
	cr_assert(strstr(out, "train.txt:2: unknown entity 'c'"), "%s", out);
	free(out);
	free(badsave[4]);
	free(save);
	free(file);
	free(bad);
}

/* A save path that cannot be made is refused before training (it used to
 * be found after training and evaluation, the metrics never printed). */
Test(train_cli, a_bad_save_path_is_refused_before_training)
{
	char *file = rdps_test_write(dir, "plainfile2", "x\n"), *save;
	char *args[] = { "--data", data, "--standalone", "--hidden_dim", "16", "--batch_size",
			 "64", "--neg_sample_size", "8", "--max_step", "100", "--log_interval",
			 "50", "--test", "--save_path", NULL, NULL };
	int code;
	char *out;

	cr_assert(asprintf(&save, "%s/sub", file) > 0);
	args[15] = save;
	out = run("badsave", args, &code);
	cr_log_info("%s", out);
	cr_assert_eq(code, 1, "%s", out);
	cr_assert(strstr(out, "--save_path") && strstr(out, "plainfile2/sub cannot be created"),
		  "%s", out);
	cr_assert_null(strstr(out, "step 50/"), "it trained first:\n%s", out);
	cr_assert_null(strstr(out, "training done"), "it trained first:\n%s", out);
	free(out);
	free(save);
	free(file);
}

/* Copies split file name of the dataset into out with its tabs as sep. */
static void write_csv(const char *name, const char *out, char sep)
{
	char *from, *text;
	FILE *f;

	cr_assert(asprintf(&from, "%s/%s", data, name) > 0);
	text = rdps_test_slurp(from);
	cr_assert(text, "%s", from);
	for (char *p = text; *p; p++)
		if (*p == '\t')
			*p = sep;
	f = fopen(out, "w");
	cr_assert(f && fputs(text, f) >= 0 && !fclose(f), "%s", out);
	free(text);
	free(from);
}

/* The metric of a result line ("Test average MRR : 0.0123\n"), as printed. */
static void printed(const char *out, const char *what, char *buf, size_t len)
{
	const char *p = strstr(out, what);

	cr_assert(p, "no '%s' in:\n%s", what, out);
	p += strlen(what);
	snprintf(buf, len, "%.*s", (int)strcspn(p, "\n"), p);
}

/*
 * A DGL-KE user's dataset (raw_udd_hrt: train, valid and test files of
 * names, comma-separated) and command line, with dglke_train replaced by
 * rdps train; the run trains, tests, and saves what DGL-KE saves.
 */
Test(train_cli, a_dglke_command_line_on_a_raw_udd_dataset_runs_unchanged)
{
	char *udd = path("mykg-csv"), *save = path("ckpts"), *csv[3], *text, *p;
	char *args[] = { "--model_name", "TransE_l2", "--data_path", udd, "--dataset", "mykg",
			 "--format", "raw_udd_hrt", "--data_files", "train.csv", "valid.csv",
			 "test.csv", "--delimiter", ",", "--save_path", save, "--batch_size", "256",
			 "--neg_sample_size", "64", "--hidden_dim", "32", "--gamma", "6.0", "--lr",
			 "0.1", "--max_step", "200", "--log_interval", "100", "--batch_size_eval",
			 "16", "-adv", "--regularization_coef", "1.00E-07", "--test", "--num_thread",
			 "1", "--num_proc", "2", "--neg_sample_size_eval", "100", NULL };
	char mrr[64], want[128];
	float *rows = NULL;
	uint64_t n, d;
	int code;
	char *out;

	cr_assert_eq(mkdir(udd, 0755), 0);
	for (int s = 0; s < 3; s++) {
		static const char *const names[] = { "train", "valid", "test" };
		char txt[16];

		snprintf(txt, sizeof(txt), "%s.txt", names[s]);
		cr_assert(asprintf(&csv[s], "%s/%s.csv", udd, names[s]) > 0);
		write_csv(txt, csv[s], ',');
	}
	out = run("dglke", args, &code);
	cr_log_info("%s", out);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert(strstr(out, "--format raw_udd_hrt: 1000 entities, 12 relations"), "%s", out);
	cr_assert(strstr(out, "training done: 200 steps (to step 200) x 2 threads"), "%s", out);
	printed(out, "Test average MRR : ", mrr, sizeof(mrr));
	cr_assert(strstr(out, "Test average HITS@10 : "), "%s", out);
	/* what DGL-KE saves: the embeddings by --dataset, its config.json */
	cr_assert(asprintf(&p, "%s/mykg_TransE_l2_entity.npy", save) > 0);
	cr_assert_eq(rdps_npy_read_f32(p, &rows, &n, &d), 0, "%s", p);
	cr_assert(n == 1000 && d == 32, "%llu x %llu", (unsigned long long)n, (unsigned long long)d);
	free(rows);
	free(p);
	cr_assert(asprintf(&p, "%s/config.json", save) > 0);
	text = rdps_test_slurp(p);
	cr_assert(text, "%s", p);
	cr_assert(strstr(text, "\"dataset\": \"mykg\",\n") && strstr(text, "\"model\": \"TransE_l2\",\n")
		  && strstr(text, "\"emb_size\": 32,\n") && strstr(text, "\"lr\": 0.1,\n") &&
		  strstr(text, "\"regularization_coef\": 1e-07,\n"), "%s", text);
	free(text);
	free(p);
	/* the metrics as printed, in results.json */
	cr_assert(asprintf(&p, "%s/results.json", save) > 0);
	text = rdps_test_slurp(p);
	cr_assert(text, "%s", p);
	snprintf(want, sizeof(want), "\"Test\": {\n        \"MRR\": %s,\n", mrr);
	cr_assert(strstr(text, want), "want '%s' in %s", want, text);
	free(text);
	free(p);
	for (int s = 0; s < 3; s++)
		free(csv[s]);
	free(out);
	free(udd);
	free(save);
}

/* Progress lines carry elapsed time and an ETA, the evaluation reports
 * its progress, and config.json holds DGL-KE's keys with its numbers:
 * 0.01 (not 0.0099999997764825821, the float's double), 2e-06, 12.0, 3. */
Test(train_cli, progress_and_config_json)
{
	char *save = path("cfg"), *p, *text;
	char *args[] = { "--data", data, "--standalone", "--hidden_dim", "16", "--batch_size",
			 "64", "--neg_sample_size", "8", "--max_step", "100", "--log_interval",
			 "50", "--lr", "0.01", "--test", "--valid", "--eval_per_relation",
			 "--save_path", save, NULL };
	static const char *const keys[] = {
		"{\n    \"dataset\": \"kg\",\n    \"model\": \"TransE_l2\",\n    \"emb_size\": 16,\n"
		"    \"max_train_step\": 100,\n    \"batch_size\": 64,\n    \"neg_sample_size\": 8,\n"
		"    \"lr\": 0.01,\n    \"gamma\": 12.0,\n    \"double_ent\": false,\n"
		"    \"double_rel\": false,\n    \"neg_adversarial_sampling\": false,\n"
		"    \"adversarial_temperature\": 1.0,\n    \"regularization_coef\": 2e-06,\n"
		"    \"regularization_norm\": 3,\n    \"emap_file\": \"entities.dict\",\n"
		"    \"rmap_file\": \"relations.dict\",\n",
	};
	int code;
	char *out = run("progress", args, &code);

	cr_log_info("%s", out);
	cr_assert_eq(code, 0, "%s", out);
	cr_assert(strstr(out, "[trainer 0] step 50/100 ") && strstr(out, "  elapsed ") &&
		  strstr(out, "  ETA "), "%s", out);
	cr_assert(strstr(out, "[trainer 0] evaluating test: 100% (1000/1000 entities)"), "%s", out);
	cr_assert(strstr(out, "[trainer 0] evaluating valid: 100% "), "%s", out);
	cr_assert(asprintf(&p, "%s/config.json", save) > 0);
	text = rdps_test_slurp(p);
	cr_assert(text && !strncmp(text, keys[0], strlen(keys[0])), "want\n%s\ngot\n%s", keys[0],
		  text);
	free(text);
	free(p);
	cr_assert(asprintf(&p, "%s/results.json", save) > 0);
	text = rdps_test_slurp(p);
	cr_assert(text && strstr(text, "\"Valid\": {") && strstr(text, "\"Test per relation\": [")
		  && strstr(text, "\"queries\": 200"), "%s", text);
	free(text);
	free(p);
	free(out);
	free(save);
}

/* SIGINT during training: the trainer stops, saves the embeddings reached
 * into --save_path, says where, and exits 130. */
Test(train_cli, sigint_saves_the_embeddings_reached)
{
	char *save = path("intr"), *log = path("intr.log"), *npy = path("intr/kg_TransE_l2_entity.npy");
	char *argv[] = { RDPS_BIN, "train", "--data", data, "--standalone", "--hidden_dim", "16",
			 "--batch_size", "64", "--neg_sample_size", "8", "--max_step",
			 "1000000000", "--log_interval", "20", "--test", "--save_path", save,
			 NULL };
	float *rows = NULL;
	uint64_t n, d;
	char *text = NULL;
	int st, i;
	pid_t pid = rdps_test_spawn(argv, log);

	cr_assert_gt(pid, 0);
	for (i = 0; i < 1500; i++) {
		text = rdps_test_slurp(log);
		if (text && strstr(text, "step 40/"))
			break;
		free(text);
		text = NULL;
		usleep(20000);
	}
	cr_assert(text, "no progress in 30 s");
	free(text);
	cr_assert_neq(access(npy, F_OK), 0, "saved before the signal");
	kill(pid, SIGINT);
	cr_assert_eq(rdps_test_wait(pid, PROC_WAIT_MS, &st), 0, "still running after SIGINT");
	text = rdps_test_slurp(log);
	cr_log_info("%s", text);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 130, "status 0x%x:\n%s", st, text);
	cr_assert(strstr(text, "interrupted at step ") && strstr(text, "the embeddings reached are "
								      "saved in ") &&
		  strstr(text, "(SIGINT)"), "%s", text);
	cr_assert_null(strstr(text, "Test average"), "%s", text);
	cr_assert_eq(rdps_npy_read_f32(npy, &rows, &n, &d), 0, "%s", npy);
	cr_assert(n == 1000 && d == 16);
	free(rows);
	free(text);
	free(npy);
	free(log);
	free(save);
}
