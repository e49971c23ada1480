//! The matrix rules, checked on small matrices: defaults, profiles, YAML
//! locations and the YAML paths of validation problems.

use super::*;

const GOOD: &str = "\
variants:
  - name: base
  - name: v1
    benchmarks: [s]
vcpus: [4, 2]
benchmarks:
  - name: s
    kind: doexec
    link: shared
    workers: 3
  - name: v
    kind: test_vmalloc
    nr_threads: nproc
profiles:
  quick:
    vcpus: [2]
    benchmarks: [s]
    sampling: {boots: 1}
";

fn p(text: &str) -> Result<Matrix, ConfigError> {
    parse(text, Path::new("/m/matrix.yaml"), None)
}

fn problems(text: &str) -> Vec<String> {
    match p(text) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("expected validation problems, got {other:?}"),
    }
}

#[test]
fn a_good_matrix_validates() {
    let m = p(GOOD).unwrap();
    assert_eq!(m.vcpus, vec![2, 4]);
    assert_eq!(m.variants[0].name, "base");
    // base runs what the other variants need
    assert_eq!(m.variants[0].benchmarks, vec!["s"]);
    assert_eq!(m.kernel.source, PathBuf::from(DEFAULT_SOURCE));
    assert_eq!(m.series_dir, PathBuf::from("/m/patches"));
    match &m.benchmarks[0].kind {
        BenchKind::Doexec {
            link,
            workers,
            duration_s,
            ..
        } => {
            assert_eq!((*link, *workers, *duration_s), (Link::Shared, Count::Fixed(3), 5));
        }
        k => panic!("{k:?}"),
    }
    assert!(matches!(
        m.benchmarks[1].kind,
        BenchKind::TestVmalloc {
            nr_threads: Count::Named(_),
            run_test_mask: 7,
            ..
        }
    ));
}

#[test]
fn profiles_select_and_override() {
    let m = parse(GOOD, Path::new("/m/matrix.yaml"), Some("quick")).unwrap();
    assert_eq!(m.vcpus, vec![2]);
    assert_eq!(m.benchmarks.len(), 1);
    assert_eq!(m.sampling.boots, 1);
    assert_eq!(m.sampling.repetitions, 5);
    let e = parse(GOOD, Path::new("/m/matrix.yaml"), Some("nightly"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("no profile `nightly` (defined: quick)"), "{e}");
}

#[test]
fn profiles_override_benchmark_parameters() {
    let text = format!("{GOOD}  short:\n    overrides:\n      s: {{duration_s: 1, warmup_s: 0}}\n");
    let m = parse(&text, Path::new("/m/matrix.yaml"), Some("short")).unwrap();
    match &m.benchmarks[0].kind {
        BenchKind::Doexec {
            duration_s,
            warmup_s,
            workers,
            ..
        } => assert_eq!((*duration_s, *warmup_s, *workers), (1, 0, Count::Fixed(3))),
        k => panic!("{k:?}"),
    }
    let bad = format!("{GOOD}  short:\n    overrides:\n      nope: {{duration_s: 1}}\n      s: {{fanout: 2}}\n");
    let e = parse(&bad, Path::new("/m/matrix.yaml"), Some("short"))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("profiles.short.overrides.nope: no benchmark `nope` in this profile"),
        "{e}"
    );
    assert!(e.contains("benchmarks[0].fanout: not a parameter of doexec"), "{e}");
    let unknown = format!("{GOOD}  short:\n    overrides:\n      s: {{speed: 1}}\n");
    assert!(matches!(
        parse(&unknown, Path::new("/m/matrix.yaml"), Some("short")),
        Err(ConfigError::Yaml { .. })
    ));
}

#[test]
fn the_clock_is_chosen_per_matrix_or_profile() {
    assert_eq!(p(GOOD).unwrap().guest.clock, Clock::Wall);
    let text = format!("{GOOD}  exact:\n    clock: icount\n    cmdline: [nokaslr]\n");
    let m = parse(&text, Path::new("/m/matrix.yaml"), Some("exact")).unwrap();
    assert_eq!(
        (m.guest.clock, m.guest.cmdline.clone()),
        (Clock::Icount, vec!["nokaslr".to_string()])
    );
    assert_eq!(
        parse(&text, Path::new("/m/matrix.yaml"), None).unwrap().guest.clock,
        Clock::Wall
    );
    let pr = problems(&format!("guest: {{clock: icount, accel: kvm}}\n{GOOD}"));
    assert!(
        pr.iter()
            .any(|x| x.starts_with("guest.clock: icount counts instructions under TCG only")),
        "{pr:?}"
    );
    let pr = problems(&format!("guest: {{clock: cycles}}\n{GOOD}"));
    assert!(
        pr.iter().any(|x| x == "guest.clock: `cycles` is not wall or icount"),
        "{pr:?}"
    );
}

#[test]
fn kernel_profiles_default_on_under_icount_only() {
    // (guest section, its boots profiled, profile boots added under icount)
    let cases = [
        ("guest: {clock: icount}", true, false),
        ("guest: {clock: icount, kernel_profile: false}", false, false),
        ("guest: {clock: icount, kernel_profile: true}", true, false),
        ("guest: {clock: wall}", false, false),
        ("guest: {kernel_profile: false}", false, false),
        ("guest: {clock: wall, kernel_profile: true}", false, true),
        ("guest: {kernel_profile: true}", false, true),
    ];
    for (guest, profiled, profile_boots) in cases {
        let g = p(&format!("{guest}\n{GOOD}")).unwrap().guest;
        assert_eq!(
            (g.kernel_profile, g.profile_boots),
            (profiled, profile_boots),
            "{guest}"
        );
    }
}

#[test]
fn yaml_errors_carry_file_line_column() {
    let e = p("variants:\n  - name: base\n   bad indent: [\n").unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("/m/matrix.yaml:3:"), "{s}");
    let e = p(&GOOD.replace("    link: shared\n", "    link: shared\n    wokers: 3\n"))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("/m/matrix.yaml:10:5: benchmarks[0]: unknown field `wokers`, expected one of"),
        "{e}"
    );
    assert!(!e.contains(" at line "), "{e}");
    let e = p(&GOOD.replace("vcpus: [4, 2]", "vcpus: [4, two]"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/m/matrix.yaml:5:"), "{e}");
}

#[test]
fn validation_names_yaml_paths() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "  - name: v1\n",
            "  - name: v1\n    apply: [nope]\n",
            "variants[1].apply[0]: no series `nope`",
        ),
        (
            "  - name: v1\n",
            "  - name: V 1\n",
            "variants[1].name: `V 1` must be lowercase",
        ),
        (
            "  - name: v1\n",
            "  - name: v1\n    ref: --upload-pack=x\n",
            "variants[1].ref: `--upload-pack=x` is not a git commit-ish",
        ),
        (
            "    benchmarks: [s]\n",
            "    benchmarks: [zz]\n",
            "variants[1].benchmarks[0]: no benchmark `zz`",
        ),
        (
            "    kind: doexec\n",
            "    kind: dexec\n",
            "benchmarks[0].kind: `dexec` is not a benchmark kind",
        ),
        (
            "    workers: 3\n",
            "    workers: 3\n    nr_threads: 4\n",
            "benchmarks[0].nr_threads: not a parameter of doexec",
        ),
        (
            "    workers: 3\n",
            "    workers: 0\n",
            "benchmarks[0].workers: must be at least 1",
        ),
        ("vcpus: [4, 2]", "vcpus: [4, 0]", "vcpus[1]: must be at least 1"),
        (
            "  - name: base\n",
            "  - name: basis\n",
            "variants: a variant named `base`",
        ),
        (
            "  - name: base\n",
            "  - name: base\n    revert: [x]\n",
            "variants[0]: `base` is the unmodified tree",
        ),
    ];
    for (from, to, want) in cases {
        let text = GOOD.replacen(from, to, 1);
        let pr = problems(&text);
        assert!(pr.iter().any(|x| x.starts_with(want)), "want `{want}` in {pr:?}");
    }
}

#[test]
fn base_config_is_a_known_target_or_an_existing_file() {
    for t in [
        "tinyconfig",
        "defconfig",
        "allnoconfig",
        "x86_64_defconfig",
        "i386_defconfig",
    ] {
        let m = p(&format!("kernel:\n  base_config: {t}\n{GOOD}")).unwrap();
        assert_eq!(m.kernel.base_config, BaseConfig::Target(t.into()), "{t}");
    }
    // make would run the host command in `--eval=$(shell ...)`
    for bad in [
        "--eval=$(shell id)config",
        "-j1config",
        "oldconfig",
        "kvm_guest.config",
        "X86_defconfig",
        "_defconfig",
    ] {
        let pr = problems(&format!("kernel:\n  base_config: '{bad}'\n{GOOD}"));
        assert!(
            pr.iter()
                .any(|x| x.starts_with("kernel.base_config: ") && x.contains("no file `/m/")),
            "{bad}: {pr:?}"
        );
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    std::fs::write(dir.join("myconfig"), "CONFIG_SMP=y\n").unwrap();
    let m = parse(
        &format!("kernel:\n  base_config: myconfig\n{GOOD}"),
        &dir.join("matrix.yaml"),
        None,
    )
    .unwrap();
    assert_eq!(m.kernel.base_config, BaseConfig::File(dir.join("myconfig")));
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn missing_fragment_and_series_files_are_named() {
    let text = format!("kernel:\n  fragments: [kconfigs/none.config]\n{GOOD}");
    let pr = problems(&text);
    assert!(
        pr.iter()
            .any(|x| x == "kernel.fragments[0]: no file `/m/kconfigs/none.config`"),
        "{pr:?}"
    );
}

#[test]
fn timeouts_have_upper_bounds() {
    let with = |build: u64, boot: u64, bench: u64| {
        let text = GOOD.replace("    workers: 3\n", &format!("    workers: 3\n    timeout_s: {bench}\n"));
        format!("{text}kernel:\n  build_timeout_min: {build}\nguest:\n  boot_timeout_s: {boot}\n")
    };
    assert!(
        p(&with(10_080, 86_400, 86_400)).is_ok(),
        "a week's build, a day's boot and benchmark are allowed"
    );
    let cases = [
        (
            with(u64::MAX, 300, 600),
            "kernel.build_timeout_min: 18446744073709551615 is more than 10080 (a week)",
        ),
        (
            with(90, u64::MAX / 1000, 600),
            "guest.boot_timeout_s: 18446744073709551 is more than 86400 (a day)",
        ),
        (
            with(90, 300, 86_401),
            "benchmarks[0].timeout_s: 86401 is more than 86400 (a day)",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(problems(&text), vec![want.to_string()]);
    }
}

#[test]
fn without_kvm_names_another_profile_of_the_matrix() {
    let with = |quick: &str, extra: &str| format!("{GOOD}    without_kvm: {quick}\n{extra}");
    let exact = "  exact:\n    clock: icount\n    vcpus: [2]\n";
    let m = parse(&with("exact", exact), Path::new("/m/matrix.yaml"), Some("quick")).unwrap();
    assert_eq!((m.without_kvm.as_deref(), m.instead_of.clone()), (Some("exact"), None));
    let m = parse(&with("exact", exact), Path::new("/m/matrix.yaml"), Some("exact")).unwrap();
    assert_eq!(m.without_kvm, None, "the profile applied is exact, which has none");
    let cases = [
        (with("nope", exact), "profiles.quick.without_kvm: no profile `nope`"),
        (
            with("quick", exact),
            "profiles.quick.without_kvm: names the profile itself",
        ),
        (
            with("exact", &format!("{exact}    without_kvm: quick\n")),
            "profiles.quick.without_kvm: `exact` has a `without_kvm:` of its own",
        ),
    ];
    for (text, want) in cases {
        let got = problems(&text);
        assert!(got.iter().any(|g| g.starts_with(want)), "{want}\n{got:?}");
    }
}

#[test]
fn thresholds_are_declared_per_metric_with_stated_defaults() {
    let m = p(GOOD).unwrap();
    // none declared: 2% for every metric, and no second stage
    assert_eq!(
        (
            m.statistics.threshold_for("s", "execs_per_s"),
            m.statistics.second_stage_boots
        ),
        (0.02, 0)
    );
    let text = format!(
        "{GOOD}statistics:\n  threshold: 3%\n  thresholds: {{s: 0.05, v.full_fit_alloc_test: 1.5%}}\n  second_stage: {{boots: 4}}\n"
    );
    let m = p(&text).unwrap();
    let t = |b: &str, metric: &str| m.statistics.threshold_for(b, metric);
    assert_eq!(
        (t("s", "execs_per_s"), t("v", "full_fit_alloc_test"), t("v", "other")),
        (0.05, 0.015, 0.03)
    );
    assert_eq!(m.statistics.second_stage_boots, 4);
    // a profile's statistics replace the top level's threshold (`floor` is its older name) and add entries
    let prof = format!(
        "{GOOD}  gate:\n    statistics: {{threshold: 1%, thresholds: {{v: 4%}}, second_stage: {{boots: 6}}}}\nstatistics:\n  floor: 3%\n  thresholds: {{s: 0.05, v.full_fit_alloc_test: 1.5%}}\n"
    );
    let m = parse(&prof, Path::new("/m/matrix.yaml"), Some("gate")).unwrap();
    let t = |b: &str, metric: &str| m.statistics.threshold_for(b, metric);
    assert_eq!(
        (
            t("s", "x"),
            t("v", "full_fit_alloc_test"),
            t("v", "other"),
            m.statistics.threshold,
            m.statistics.second_stage_boots
        ),
        (0.05, 0.015, 0.04, 0.01, 6)
    );
    let top = parse(&prof, Path::new("/m/matrix.yaml"), None).unwrap();
    assert_eq!((top.statistics.threshold, top.statistics.second_stage_boots), (0.03, 0));
}

/// Issue 30: sampling and resample counts have upper bounds, named by their
/// YAML paths (4294967295 boots aborted on allocation after the run
/// directory was made; 10^12 resamples aborted `harness report`).
#[test]
fn sampling_and_resamples_have_upper_bounds() {
    let e = problems(&format!(
        "{GOOD}sampling: {{boots: 4294967295, repetitions: 10001, warmup_repetitions: 1001}}\n\
         statistics: {{resamples: 1000000000000}}\n"
    ));
    for want in [
        "sampling.boots: 4294967295 is more than 10000, the most a run takes",
        "sampling.repetitions: 10001 is more than 10000",
        "sampling.warmup_repetitions: 1001 is more than 1000",
        "statistics.resamples: 1000000000000 must lie in 1..=1000000",
    ] {
        assert!(e.iter().any(|x| x.contains(want)), "{want}: {e:?}");
    }
    assert!(problems(&format!("{GOOD}statistics: {{resamples: 0}}\n"))
        .iter()
        .any(|x| x.contains("statistics.resamples: 0 must lie in 1..=1000000")));
    p(&format!(
        "{GOOD}sampling: {{boots: 10000, repetitions: 10000, warmup_repetitions: 1000}}\nstatistics: {{resamples: 1000000}}\n"
    ))
    .unwrap();
}

#[test]
fn bad_thresholds_are_named_by_their_yaml_path() {
    let text = format!(
        "{GOOD}statistics:\n  threshold: 120%\n  thresholds: {{nope.rate: 0.01, s: lots}}\n  second_stage: {{boots: 0}}\n"
    );
    let e = problems(&text);
    let has = |s: &str| e.iter().any(|x| x.contains(s));
    assert!(has("statistics.threshold: 1.2 must lie in [0, 1)"), "{e:?}");
    assert!(
        has("statistics.thresholds.nope.rate: `nope.rate` names no benchmark"),
        "{e:?}"
    );
    assert!(
        has("statistics.thresholds.s: `lots` is not a fraction (write 0.03 or 3%)"),
        "{e:?}"
    );
    assert!(has("statistics.second_stage.boots: 0 must lie in 1..=100"), "{e:?}");
    let both = problems(&format!("{GOOD}statistics: {{floor: 0.02, threshold: 0.02}}\n"));
    assert!(
        both.iter()
            .any(|x| x.contains("statistics.floor: `floor` is the older name of `threshold`")),
        "{both:?}"
    );
}

/// Round five: a key metric's metric is one its benchmark can produce
/// (`static-doexec.execs_per_sec` passed `check` and then matched no cell,
/// so the gate judged nothing), named by its YAML path with the metrics
/// there are; under some setting of the matrix is enough.
#[test]
fn a_key_metric_names_a_metric_its_benchmark_produces() {
    let e = problems(&format!("{GOOD}key_metrics: [s.execs_per_sec, v, nope.rate]\n"));
    assert_eq!(
        e,
        [
            "key_metrics[0]: `s.execs_per_sec` names no metric of s (its metrics: execs_per_s)",
            "key_metrics[2]: `nope.rate` names no benchmark (write `benchmark` or `benchmark.metric`)",
        ]
    );
    // test_vmalloc's metrics are the tests its run_test_mask selects (7: the first three)
    let e = problems(&format!("{GOOD}key_metrics: [v.random_size_alloc_test, v.usec]\n"));
    let theirs =
        "names no metric of v (its metrics: fix_size_alloc_test, full_fit_alloc_test, long_busy_list_alloc_test)";
    assert_eq!(e.len(), 2, "{e:?}");
    assert!(
        e[0].starts_with("key_metrics[0]: `v.random_size_alloc_test` ") && e[0].ends_with(theirs),
        "{e:?}"
    );
    // a profile's run_test_mask, or its instruction-counting clock, can produce them
    let wide = format!(
        "{GOOD}  wide:\n    clock: icount\n    overrides:\n      v: {{run_test_mask: 15}}\n\
         key_metrics: [v.random_size_alloc_test, s.insns_per_op, s.user_insns_per_op, s.execs_per_s]\n"
    );
    p(&wide).unwrap();
    let m = parse(&wide, Path::new("/m/matrix.yaml"), Some("quick")).unwrap();
    assert_eq!(
        m.key_metrics,
        ["s.insns_per_op", "s.user_insns_per_op", "s.execs_per_s"],
        "v is not in quick"
    );
    // no setting counts instructions with kernel profiles: no per-op instructions
    let e = problems(&wide.replace("benchmarks:\n", "guest: {kernel_profile: false}\nbenchmarks:\n"));
    assert!(
        e.iter()
            .any(|x| x == "key_metrics[1]: `s.insns_per_op` names no metric of s (its metrics: execs_per_s)"),
        "{e:?}"
    );
}

/// The metrics of each kind: fork_prlimit's two and, profiled, its
/// syscalls' instructions per call; a program's declared ones, or any name
/// where it prints `sample` lines itself.
#[test]
fn each_kind_has_its_metrics_for_keys() {
    let fork = "variants:\n  - name: base\nvcpus: [2]\nguest: {clock: icount, accel: tcg}\n\
                benchmarks:\n  - {name: f, kind: fork_prlimit}\n";
    p(&format!(
        "{fork}key_metrics: [f.wall_s, f.iterations_per_s, f.prlimit64_insns_per_call, f.kernel_insns_per_op]\n"
    ))
    .unwrap();
    let e = problems(&format!("{fork}key_metrics: [f.execs_per_s]\n"));
    assert_eq!(
        e,
        ["key_metrics[0]: `f.execs_per_s` names no metric of f (its metrics: getpriority_insns_per_call, insns_per_op, iterations_per_s, kernel_insns_per_op, prlimit64_insns_per_call, setpriority_insns_per_call, user_insns_per_op, wall_s)"]
    );
    let declared = program("run: /bin/sh, metrics: [{name: rate, regex: 'rate (?P<value>[0-9.]+)', unit: op/s}]");
    p(&format!("{declared}key_metrics: [p.rate]\n")).unwrap();
    let e = problems(&format!("{declared}key_metrics: [p.rates]\n"));
    assert_eq!(
        e,
        ["key_metrics[0]: `p.rates` names no metric of p (its metrics: rate)"]
    );
    // the sample protocol: names known only from the output (the gate says if one matched nothing)
    p(&format!("{}key_metrics: [p.anything]\n", program("run: /bin/sh"))).unwrap();
}

/// Round five: a threshold's key names a metric its benchmark produces,
/// the top level's and each profile's (checked whichever profile runs),
/// else the default threshold silently replaced the one meant.
#[test]
fn a_threshold_names_a_metric_its_benchmark_produces() {
    let text = format!(
        "{GOOD}  gate:\n    statistics: {{thresholds: {{s.execs: 1%}}}}\nstatistics:\n  thresholds: {{s.nope: 5%, v.fix_size_alloc_test: 3%}}\n"
    );
    let want = [
        "statistics.thresholds.s.nope: `s.nope` names no metric of s (its metrics: execs_per_s)",
        "profiles.gate.statistics.thresholds.s.execs: `s.execs` names no metric of s (its metrics: execs_per_s)",
    ];
    assert_eq!(problems(&text), want);
    let e = match parse(&text, Path::new("/m/matrix.yaml"), Some("gate")) {
        Err(ConfigError::Invalid { problems, .. }) => problems,
        other => panic!("{other:?}"),
    };
    assert_eq!(e, want, "each said once, at its own path");
}

/// A matrix with one `program` benchmark whose keys are `keys` (YAML flow
/// mapping items after `name` and `kind`).
fn program(keys: &str) -> String {
    format!("variants:\n  - name: base\nvcpus: [2]\nbenchmarks:\n  - {{name: p, kind: program, {keys}}}\n")
}

#[test]
fn a_program_benchmark_validates_with_its_path_metrics_and_arguments() {
    let m = p(&program(
        "run: /bin/sh, args: [-c, 'echo x; rm -rf /', '{workers}'], workers: 3, \
         metrics: [{name: rate, regex: 'rate (?P<value>[0-9.]+)', unit: op/s}, \
         {name: lat, regex: 'lat (?P<value>[0-9.]+)', unit: us, better: lower}], ops: 'ops (?P<value>[0-9]+)', \
         work: [pipe_write], user: 1000",
    ))
    .unwrap();
    let BenchKind::Program {
        executable,
        args,
        metrics,
        ops,
        work,
        user,
        ..
    } = &m.benchmarks[0].kind
    else {
        panic!("{:?}", m.benchmarks[0].kind)
    };
    assert_eq!(
        executable,
        &Executable::Installed {
            name: "/bin/sh".into(),
            found: Some("/bin/sh".into())
        }
    );
    assert_eq!(args[1], "echo x; rm -rf /", "metacharacters are kept as written");
    assert_eq!(
        metrics
            .iter()
            .map(|m| (m.name.as_str(), m.higher_is_better))
            .collect::<Vec<_>>(),
        [("rate", true), ("lat", false)]
    );
    assert!(ops.is_some());
    assert_eq!((work.as_slice(), *user), (&["pipe_write".to_string()][..], Some(1000)));
}

#[test]
fn a_program_benchmark_names_its_bad_parts_by_yaml_path() {
    let cases = [
        (
            "run: no-such-program-here",
            "benchmarks[0].run: `no-such-program-here` is not installed on this host",
        ),
        (
            "run: /etc/passwd",
            "benchmarks[0].run: `/etc/passwd` is not executable (make it so with chmod +x, or name an installed program)",
        ),
        (
            "run: /bin/sh, sources: [a.c]",
            "benchmarks[0].kind: a program benchmark names exactly one of run (an installed program), sources (C files) or build (a directory); this one names run and sources",
        ),
        (
            "args: [x]",
            "benchmarks[0].kind: a program benchmark names exactly one of run (an installed program), sources (C files) or build (a directory); this one names none",
        ),
        (
            "run: sh, metrics: [{name: r, regex: 'a(b'}]",
            "benchmarks[0].metrics[0].regex: `a(b` is not a regular expression",
        ),
        (
            "run: sh, metrics: [{name: r, regex: 'r ([0-9]+)'}]",
            "benchmarks[0].metrics[0].regex: `r ([0-9]+)` has no value group",
        ),
        (
            "run: sh, metrics: [{name: r, regex: '(?P<value>1)', better: up}]",
            "benchmarks[0].metrics[0].better: `up` is not higher or lower",
        ),
        (
            "run: sh, metrics: [{name: r, regex: '(?P<value>1)'}, {name: r, regex: '(?P<value>2)'}]",
            "benchmarks[0].metrics[1].name: `r` is defined twice",
        ),
        (
            "run: sh, ops: 'n=([0-9]+)'",
            "benchmarks[0].ops: `n=([0-9]+)` has no value group",
        ),
        (
            "run: sh, args: ['{cpus}']",
            "benchmarks[0].args[0]: `{cpus}` is not a placeholder",
        ),
        ("run: sh, user: 0", "benchmarks[0].user: 0 is root"),
        (
            "run: sh, user: 4294967295",
            "benchmarks[0].user: 4294967295 is not a user a guest runs as; use a uid from 1 to 65534",
        ),
        ("run: sh, user: 65535", "benchmarks[0].user: 65535 is not a user"),
        (
            "sources: [/nonexistent/x.c]",
            "benchmarks[0].sources[0]: no file `/nonexistent/x.c`",
        ),
        (
            "build: {dir: /nonexistent, command: [make], binary: x}",
            "benchmarks[0].build.dir: no directory `/nonexistent`",
        ),
        (
            "build: {dir: /tmp, command: [], binary: ../x}",
            "benchmarks[0].build.command: give the build command",
        ),
        (
            "run: sh, link: static",
            "benchmarks[0].link: not a parameter of program",
        ),
    ];
    for (keys, want) in cases {
        let ps = problems(&program(keys));
        assert!(ps.iter().any(|p| p.starts_with(want)), "{keys}: {ps:?}");
    }
}

/// A program benchmark no variant runs need not be installed here (the
/// built-in matrix defines real suites that only `--profile peers` runs).
#[test]
fn a_program_no_variant_runs_need_not_be_installed() {
    let m = "variants:\n  - name: base\n  - name: v\n    benchmarks: [s]\nvcpus: [2]\nbenchmarks:\n  \
             - {name: s, kind: doexec}\n  - {name: p, kind: program, run: no-such-program-here}\n";
    assert!(p(m).is_ok(), "{:?}", p(m).err());
    let used = m.replace("benchmarks: [s]", "benchmarks: [s, p]");
    assert!(problems(&used)
        .iter()
        .any(|e| e.starts_with("benchmarks[1].run: `no-such-program-here` is not installed")));
}

/// `statistics.contention` says what `more contention` does to the gate:
/// warn by default, fail when asked; a misspelt value is named.
#[test]
fn the_contention_gate_is_warn_or_fail() {
    use crate::config::validated::ContentionGate;
    assert_eq!(p(GOOD).unwrap().statistics.contention, ContentionGate::Warn);
    let m = p(&format!("{GOOD}statistics: {{contention: fail}}\n")).unwrap();
    assert_eq!(m.statistics.contention, ContentionGate::Fail);
    let e = problems(&format!("{GOOD}statistics: {{contention: fial}}\n"));
    assert!(
        e.iter()
            .any(|x| x.contains("statistics.contention: `fial` is neither `warn` nor `fail`")),
        "{e:?}"
    );
}

/// `guest.contention` turns the plugin's contention counts off; on by
/// default.
#[test]
fn contention_counts_are_on_unless_turned_off() {
    assert!(p(GOOD).unwrap().guest.contention);
    let off = p(&format!("guest: {{clock: icount, contention: false}}\n{GOOD}")).unwrap();
    assert!(!off.guest.contention && off.guest.kernel_profile);
    let e = p(&format!("guest: {{contention: maybe}}\n{GOOD}"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("guest.contention: invalid type"), "{e}");
}

/// Issue 47: a byte-order mark is left out; a guest's memory has a fixed
/// bound, checked before anything is built.
#[test]
fn a_byte_order_mark_is_read_past_and_guest_memory_is_bounded() {
    let m = p(&format!("\u{feff}{GOOD}")).unwrap();
    assert_eq!(m.variants[0].name, "base");
    let ps = problems(&format!("{GOOD}guest: {{memory_mib: 1000000000000}}\n"));
    assert!(
        ps.iter()
            .any(|p| p.starts_with("guest.memory_mib: 1000000000000 is more than 4194304 (4 TiB)")),
        "{ps:?}"
    );
    assert!(p(&format!("{GOOD}guest: {{memory_mib: 4194304}}\n")).is_ok());
}

/// Issue 47: a duplicate key is located at its second occurrence (serde_yaml
/// names the mapping's start), in the top-level mapping and in a variant's.
#[test]
fn a_duplicate_key_is_located_where_it_repeats() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "kernel: {source: /src}\nvariants: [{name: base}]\nvcpus: [2]\nbenchmarks: [{name: s, kind: doexec}]\nvcpus: [4]\n",
            "5:1: duplicate field `vcpus`",
        ),
        (
            "kernel: {source: /src}\nvariants:\n  - name: base\n  - name: v\n    apply: [x]\n    # again\n    apply: [y]\nvcpus: [2]\n",
            "7:5: variants[1]: duplicate field `apply`",
        ),
    ];
    for (text, want) in cases {
        let path = dir.path().join("m.yaml");
        std::fs::write(&path, text).unwrap();
        let e = crate::config::load(&path, None).unwrap_err().to_string();
        assert_eq!(e, format!("{}:{want}", path.display()), "{text}");
    }
}

/// Issue 47: bytes that are not UTF-8 are named at their line, column and
/// offset, with the remedy.
#[test]
fn a_matrix_that_is_not_utf8_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, b"kernel: {source: /src}\nvariants: [{name: b\xe9}]\n").unwrap();
    let e = crate::config::load(&path, None).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "{}:2:20: byte 0xe9 at offset 42 is not UTF-8: save the matrix as UTF-8",
            path.display()
        )
    );
}

/// Issue 47: past 256 YAML aliases a matrix is refused before anything is
/// expanded (a few lines could ask for gigabytes); `*` in quotes, comments
/// and inside words is no alias; an argument longer than 4096 bytes is
/// refused at its YAML path.
#[test]
fn aliases_and_long_arguments_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.yaml");
    let big = format!(
        "kernel: {{source: /src}}\nvariants: [{{name: base}}]\nvcpus: [2]\n\
         benchmarks: [{{name: s, kind: program, run: /bin/sh, args: [&s \"{}\", {}]}}]\n",
        "x".repeat(1000),
        vec!["*s"; 300].join(", ")
    );
    std::fs::write(&path, big).unwrap();
    let e = crate::config::load(&path, None).unwrap_err().to_string();
    // the 257th alias: after `benchmarks: … args: [&s "` (63 columns), the string, `", ` and 256 × `*s, `
    let column = 63 + 1000 + 3 + 256 * 4 + 1;
    assert!(e.contains(&format!(":4:{column}: more than 256 YAML aliases")), "{e}");
    let few = "# a *comment\nvariants: [{name: base}]\nvcpus: [2]\nbenchmarks: [{name: s, kind: program, run: /bin/sh, args: ['*', \"a*b\", x*y]}]\n";
    assert_eq!(super::events::excess(&few.repeat(300)), None);
    let ps = problems(&format!(
        "variants: [{{name: base}}]\nvcpus: [2]\nbenchmarks: [{{name: s, kind: program, run: /bin/sh, args: [ok, {}]}}]\n",
        "y".repeat(5000)
    ));
    assert!(
        ps.iter()
            .any(|p| p.starts_with("benchmarks[0].args[1]: 5000 bytes long, more than 4096")),
        "{ps:?}"
    );
}

/// Issue 47: `files:` are counted as the guest image takes them (links
/// into directories not followed, so a link to a parent is no loop), and
/// more than half the guest's memory is refused at validation.
#[test]
fn files_beyond_half_the_guest_memory_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::os::unix::fs::symlink("..", data.join("up")).unwrap();
    let f = std::fs::File::create(data.join("big")).unwrap();
    f.set_len(200 << 20).unwrap(); // sparse: 200 MiB of size, no disk
    let yaml = |mib: u64| {
        format!(
            "kernel: {{source: /src}}\nvariants: [{{name: base}}]\nvcpus: [2]\nguest: {{memory_mib: {mib}}}\n\
             benchmarks: [{{name: s, kind: program, run: /bin/sh, files: [{}]}}]\n",
            data.display()
        )
    };
    let path = dir.path().join("m.yaml");
    std::fs::write(&path, yaml(256)).unwrap();
    let e = crate::config::load(&path, None).unwrap_err().to_string();
    assert!(
        e.contains("benchmarks[0].files: 200 MiB in all, more than half the guest's 256 MiB of memory"),
        "{e}"
    );
    std::fs::write(&path, yaml(512)).unwrap();
    let ok = crate::config::load(&path, None);
    assert!(ok.is_ok(), "{:?}", ok.err().map(|e| e.to_string()));
}

/// Issue 46: what a program benchmark runs is one of three, chosen once;
/// run.json keeps the three keys it had, and reads back the same choice.
#[test]
fn a_program_executable_is_one_choice_kept_as_its_three_keys() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("p.c"), "int main(void) { return 0; }\n").unwrap();
    let matrix = root.path().join("matrix.yaml");
    let table = [
        ("run: sh", ""),
        (
            "run: no-such-program-here",
            r#""run":"no-such-program-here","sources":[],"build":null"#,
        ),
        ("sources: [p.c]", ""),
    ];
    for (keys, record) in table {
        let mut text = program(keys);
        if keys.starts_with("run: no-such") {
            // a program not installed is a problem only where a variant runs it
            text = text.replace("  - name: base\n", "  - name: base\n    benchmarks: [d]\n")
                + "  - {name: d, kind: doexec}\n";
        }
        let m = parse(&text, &matrix, None).unwrap_or_else(|e| panic!("{keys}: {e}"));
        let BenchKind::Program { executable, .. } = &m.benchmarks[0].kind else {
            panic!("{keys}")
        };
        let json = serde_json::to_string(&m.benchmarks[0].kind).unwrap();
        match executable {
            Executable::Installed { found: Some(p), .. } => {
                assert!(p.is_absolute(), "{keys}");
                assert_eq!(executable.guest_path("p"), p.display().to_string());
                assert!(
                    json.contains(&format!(r#""run":"{}","sources":[],"build":null"#, p.display())),
                    "{json}"
                );
            }
            Executable::Installed { found: None, .. } => {
                assert_eq!(executable.guest_path("p"), "no-such-program-here");
                assert!(json.contains(record), "{json}");
            }
            Executable::Sources(s) => {
                assert_eq!(s, &[root.path().join("p.c")], "made absolute");
                assert_eq!(executable.guest_path("p"), "/bench/prog/p");
                assert!(
                    json.contains(&format!(r#""run":"","sources":["{}"],"build":null"#, s[0].display())),
                    "{json}"
                );
            }
            Executable::Built(_) => panic!("{keys}: built"),
        }
        // read back, the same choice with the same paths
        let back: BenchKind = serde_json::from_str(&json).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), json, "{keys}");
        let BenchKind::Program { executable: again, .. } = &back else {
            panic!("{json}")
        };
        assert_eq!(again.guest_path("p"), executable.guest_path("p"), "{json}");
    }
}

/// Issue 58: a benchmark name with a dot would make `bench.metric` keys
/// ambiguous, and is refused at its YAML path.
#[test]
fn a_benchmark_name_with_a_dot_is_refused() {
    let ps = problems("variants: [{name: base}]\nvcpus: [2]\nbenchmarks: [{name: a.b, kind: doexec}]\n");
    assert!(
        ps.iter()
            .any(|p| p.starts_with("benchmarks[0].name: `a.b` holds a '.'")),
        "{ps:?}"
    );
}
