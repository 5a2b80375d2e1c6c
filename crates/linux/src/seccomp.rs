//! The seccomp filter installed in the sandboxed process right before execve.
//!
//! The policy is data: [`DEFAULT_POLICY_JSON`] is `policy/seccomp.json`, in seccompiler's
//! JSON format, with a `comment` on every rule saying why it exists. Everything the policy
//! does not list is allowed: it is a deny-list of the kernel interfaces that matter for
//! escaping the sandbox or attacking the host, not a profile of what programs need.
//!
//! # Sections
//! A seccompiler filter has one action for all of its rules, so the policy is split into
//! *sections* (its top-level keys), each a deny-list with its own action: `deny_eperm`
//! fails calls with EPERM, `deny_enosys` fails `clone3` with ENOSYS. A key ending in
//! `@<arch>` (`deny_eperm@x86_64`) only applies on that architecture, for syscalls that
//! exist nowhere else. A syscall belongs to one section only, so the order of sections
//! never changes the outcome.
//!
//! seccompiler knows syscalls by name up to Linux 6.12. A rule for a newer one also gives
//! its number, `"nr": 467`, and is matched by that number (`numbered_rules`); since Linux
//! 5.1 (number 424) a new syscall has the same number on every architecture.
//!
//! # The program
//! The installed classic-BPF program is, in order:
//! 1. `abi_prefix`, written by hand: a foreign `AUDIT_ARCH` is killed, and on x86_64 so is
//!    the x32 ABI, which shares x86_64's `AUDIT_ARCH` and which seccompiler does not check;
//! 2. each section in key order: its numbered rules, then what seccompiler compiled of the
//!    rest, whose "allow" returns become jumps to the next section (`append_section`);
//! 3. a final "allow".
//!
//! Classic BPF jumps are relative and only go forward, so a program compiled by seccompiler
//! stays valid when it is moved to a later offset behind the prefix or another section.

use std::collections::BTreeMap;
use std::fmt;
use std::mem::offset_of;
use std::sync::OnceLock;

use nix::errno::Errno;
use seccompiler::{BpfProgram, SeccompAction, TargetArch};
use serde_json::{Map, Value};

/// The policy built into runbox: `crates/linux/policy/seccomp.json`.
pub const DEFAULT_POLICY_JSON: &str = include_str!("../policy/seccomp.json");

/// [`DEFAULT_POLICY_JSON`] compiled for x86_64; `tests/seccomp_policy.rs` fails when the two
/// differ and rewrites this file with `RUNBOX_UPDATE_SECCOMP_BPF=1`.
#[cfg(target_arch = "x86_64")]
pub const PRECOMPILED_DEFAULT: Option<&[u8]> = Some(include_bytes!("../policy/seccomp.x86_64.bpf"));
#[cfg(not(target_arch = "x86_64"))]
pub const PRECOMPILED_DEFAULT: Option<&[u8]> = None;

/// Why a seccomp policy could not be turned into a filter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp policy is not valid json: {reason}")]
    Json { reason: String },
    #[error("seccomp policy must be an object of named sections, each with mismatch_action, match_action and filter")]
    NotSections,
    #[error("seccomp policy section `{section}`: {reason}")]
    Section { section: String, reason: String },
    #[error("seccomp policy section `{section}`, filter[{index}] (`{syscall}`): {reason}")]
    Rule { section: String, index: usize, syscall: String, reason: String },
    #[error("seccomp filters are not supported on {arch}: runbox knows the audit arch of x86_64 and aarch64 only")]
    UnsupportedArch { arch: &'static str },
    #[error("seccomp filter has {instructions} bpf instructions, more than the kernel's limit of {max}", max = libc::BPF_MAXINSNS)]
    TooLarge { instructions: usize },
}

/// A compiled seccomp filter for the native architecture, ready to install.
#[derive(Clone)]
pub struct SeccompFilter {
    program: Vec<libc::sock_filter>,
    denied: Vec<DeniedSyscall>,
}

/// One rule of the policy, as it applies on this architecture (for `runbox doctor` and docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeniedSyscall {
    pub syscall: String,
    /// What the program sees: an errno name such as `EPERM`, or the seccompiler action
    /// (`kill_process`, `trap`, ...) for sections that do not fail with an errno.
    pub action: String,
    /// Whether the rule only matches some argument values (`clone` with a namespace flag).
    pub conditional: bool,
    /// Why the rule exists.
    pub comment: String,
}

impl SeccompFilter {
    /// The built-in policy, compiled on first use and then shared; later calls cost an
    /// atomic load. Compile it before forking: the child may only call [`Self::install`].
    ///
    /// On x86_64 the program comes precompiled (`policy/seccomp.x86_64.bpf`, checked against
    /// the JSON by a test), which saves every run a few hundred microseconds of compiling;
    /// its [`Self::denied_syscalls`] is then empty: compile [`DEFAULT_POLICY_JSON`] to list
    /// the rules.
    pub fn default_policy() -> Result<&'static SeccompFilter, SeccompError> {
        static DEFAULT: OnceLock<Result<SeccompFilter, SeccompError>> = OnceLock::new();
        DEFAULT
            .get_or_init(|| match PRECOMPILED_DEFAULT {
                Some(bytes) => Ok(Self::from_bpf_bytes(bytes)),
                None => Self::from_json(DEFAULT_POLICY_JSON),
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// A program in the kernel's `struct sock_filter` layout, 8 bytes per instruction in
    /// native byte order, as [`Self::to_bpf_bytes`] writes it.
    fn from_bpf_bytes(bytes: &[u8]) -> SeccompFilter {
        let program = bytes
            .chunks_exact(8)
            .map(|i| libc::sock_filter {
                code: u16::from_ne_bytes([i[0], i[1]]),
                jt: i[2],
                jf: i[3],
                k: u32::from_ne_bytes([i[4], i[5], i[6], i[7]]),
            })
            .collect();
        SeccompFilter { program, denied: Vec::new() }
    }

    /// The program in the layout [`Self::default_policy`] embeds.
    pub fn to_bpf_bytes(&self) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(self.program.len() * 8);
        for i in &self.program {
            bytes.extend_from_slice(&i.code.to_ne_bytes());
            bytes.extend_from_slice(&[i.jt, i.jf]);
            bytes.extend_from_slice(&i.k.to_ne_bytes());
        }
        bytes
    }

    /// Compiles a policy in the format of `policy/seccomp.json` (see the module docs).
    /// Errors name the section and, where one is to blame, the rule.
    pub fn from_json(json: &str) -> Result<SeccompFilter, SeccompError> {
        let abi = NativeAbi::current()?;
        let policy: Value = serde_json::from_str(json).map_err(|e| SeccompError::Json { reason: e.to_string() })?;
        let sections = policy.as_object().filter(|s| !s.is_empty()).ok_or(SeccompError::NotSections)?;
        // Sorted explicitly: serde_json keeps insertion order if any crate in the build
        // enables its `preserve_order` feature.
        let mut names: Vec<&String> = sections.keys().collect();
        names.sort();

        let mut program = abi_prefix(&abi);
        let mut denied = Vec::new();
        let mut owners = BTreeMap::new();
        for name in names {
            let body = &sections[name];
            let rules = check_section(name, body, &mut owners)?;
            if section_arch(name)?.is_some_and(|arch| arch != abi.name) {
                continue;
            }
            let (numbered, named) = numbered_rules(name, body)?;
            program.extend(numbered);
            let compiled = compile_section(name, body, &named, abi.target)?;
            append_section(&mut program, compiled)?;
            denied.extend(rules);
        }
        program.push(stmt(RET_K, libc::SECCOMP_RET_ALLOW));
        if program.len() > libc::BPF_MAXINSNS as usize {
            return Err(SeccompError::TooLarge { instructions: program.len() });
        }
        Ok(SeccompFilter { program, denied })
    }

    /// The rules that apply on this architecture, in section then policy order.
    pub fn denied_syscalls(&self) -> &[DeniedSyscall] {
        &self.denied
    }

    /// The BPF program, for inspection; [`Self::install`] is the way to use it.
    pub fn program(&self) -> &[libc::sock_filter] {
        &self.program
    }

    /// Installs the filter on the calling thread, for itself and everything it will exec
    /// or fork, with seccomp(2) and no flags; returns the errno on failure.
    ///
    /// **Async-signal-safe**: meant for the forked child right before execve; it allocates
    /// nothing, takes no lock and cannot panic.
    ///
    /// **The caller must have set `PR_SET_NO_NEW_PRIVS`** (prctl(2)) on this thread first;
    /// without it the kernel accepts the filter only from a thread with `CAP_SYS_ADMIN`.
    pub fn install(&self) -> Result<(), Errno> {
        crate::sys::seccomp::install(self)
    }
}

impl fmt::Debug for SeccompFilter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SeccompFilter")
            .field("instructions", &self.program.len())
            .field("denied", &self.denied.iter().map(|d| &d.syscall).collect::<Vec<_>>())
            .finish()
    }
}

/// The syscall ABI of the build target: the only one a sandboxed program may use.
struct NativeAbi {
    name: &'static str,
    target: TargetArch,
    /// What the kernel puts in `seccomp_data.arch` for this ABI (<linux/audit.h>).
    audit_arch: u32,
}

// <linux/audit.h>: AUDIT_ARCH_X86_64 is EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE,
// and likewise for aarch64 (libc does not export these).
const AUDIT_ARCH_64BIT_LE: u32 = 0x8000_0000 | 0x4000_0000;
const AUDIT_ARCH_X86_64: u32 = 62 | AUDIT_ARCH_64BIT_LE;
const AUDIT_ARCH_AARCH64: u32 = 183 | AUDIT_ARCH_64BIT_LE;
/// Architectures a section key may name after `@`.
const KNOWN_ARCHES: [&str; 2] = ["x86_64", "aarch64"];

impl NativeAbi {
    fn current() -> Result<NativeAbi, SeccompError> {
        let name = std::env::consts::ARCH;
        let audit_arch = match name {
            "x86_64" => AUDIT_ARCH_X86_64,
            "aarch64" => AUDIT_ARCH_AARCH64,
            _ => return Err(SeccompError::UnsupportedArch { arch: name }),
        };
        let target = TargetArch::try_from(name).map_err(|_| SeccompError::UnsupportedArch { arch: name })?;
        Ok(NativeAbi { name, target, audit_arch })
    }
}

// Classic BPF opcodes (<linux/bpf_common.h>); they fit the 16-bit `code` field.
const LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const JGE_K: u16 = (libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K) as u16;
const JA: u16 = (libc::BPF_JMP | libc::BPF_JA) as u16;
const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
/// Bit 30 of the syscall number marks the x32 ABI on x86_64 (`__X32_SYSCALL_BIT`).
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

fn stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// The hand-written start of the program: only the native ABI gets past it.
///
/// A foreign `AUDIT_ARCH` (i386 through `int 0x80` on x86_64, arm32 on aarch64) is killed,
/// as seccompiler's own arch check does: the deny-list's numbers mean other syscalls there.
/// On x86_64, seccomp(2) warns that "the x86-64 ABI and the x32 ABI both use
/// AUDIT_ARCH_X86_64", so a deny-list by number "can be bypassed by a malicious program that
/// sets __X32_SYSCALL_BIT": we kill every number at or above that bit. The comparison is
/// unsigned, as in the man page's example, so negative numbers (no syscall) die too.
fn abi_prefix(abi: &NativeAbi) -> Vec<libc::sock_filter> {
    let arch = offset_of!(libc::seccomp_data, arch) as u32;
    let nr = offset_of!(libc::seccomp_data, nr) as u32;
    let mut prefix = vec![
        stmt(LD_W_ABS, arch),
        jump(JEQ_K, abi.audit_arch, 1, 0), // native: skip the kill
        stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
    ];
    if abi.name == "x86_64" {
        prefix.extend([
            stmt(LD_W_ABS, nr),
            jump(JGE_K, X32_SYSCALL_BIT, 0, 1), // below the x32 range: skip the kill
            stmt(RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        ]);
    }
    prefix
}

/// Appends one section compiled by seccompiler. Its "allow" returns mean "no rule of this
/// section matched" (every section's mismatch action is allow, and its match action differs,
/// see [`check_section`]), so each becomes a jump to the end of the section, where the next
/// section or the final allow starts. Each instruction is replaced by exactly one, so the
/// section's own relative jumps keep their targets.
fn append_section(program: &mut Vec<libc::sock_filter>, section: BpfProgram) -> Result<(), SeccompError> {
    let len = section.len();
    for (i, insn) in section.into_iter().enumerate() {
        program.push(if insn.code == RET_K && insn.k == libc::SECCOMP_RET_ALLOW {
            let to_end = u32::try_from(len - i - 1).map_err(|_| SeccompError::TooLarge { instructions: len })?;
            stmt(JA, to_end)
        } else {
            let seccompiler::sock_filter { code, jt, jf, k } = insn;
            libc::sock_filter { code, jt, jf, k }
        });
    }
    Ok(())
}

/// `Some(arch)` when the section key is `name@arch`: the section applies on `arch` only.
fn section_arch(name: &str) -> Result<Option<&str>, SeccompError> {
    match name.split_once('@') {
        None => Ok(None),
        Some((_, arch)) if KNOWN_ARCHES.contains(&arch) => Ok(Some(arch)),
        Some((_, arch)) => Err(SeccompError::Section {
            section: name.to_owned(),
            reason: format!("unknown architecture `{arch}` after `@`; known: {}", KNOWN_ARCHES.join(", ")),
        }),
    }
}

/// Checks what seccompiler does not: the section is a deny-list (so [`append_section`] may
/// chain it), every rule says why it exists, a syscall's rules live in one section, and no
/// rule would be silently dropped. `owners` maps each syscall seen so far to its section.
fn check_section(
    name: &str,
    body: &Value,
    owners: &mut BTreeMap<String, String>,
) -> Result<Vec<DeniedSyscall>, SeccompError> {
    let section_error = |reason: &str| SeccompError::Section { section: name.to_owned(), reason: reason.to_owned() };
    let body = body.as_object().ok_or_else(|| section_error("must be an object"))?;
    if field(body, "mismatch_action", "default_action") != Some(&Value::from("allow")) {
        return Err(section_error(
            "mismatch_action must be \"allow\": a section is a deny-list, and calls it does not match go on to the next section",
        ));
    }
    let action = field(body, "match_action", "filter_action")
        .and_then(describe_action)
        .ok_or_else(|| section_error("match_action must be an action other than \"allow\", such as {\"errno\": 1}"))?;
    let rules =
        body.get("filter").and_then(Value::as_array).ok_or_else(|| section_error("filter must be a list of rules"))?;

    let mut denied: Vec<DeniedSyscall> = Vec::with_capacity(rules.len());
    for (index, rule) in rules.iter().enumerate() {
        let syscall = rule.get("syscall").and_then(Value::as_str);
        let rule_error = |reason: String| SeccompError::Rule {
            section: name.to_owned(),
            index,
            syscall: syscall.unwrap_or("?").to_owned(),
            reason,
        };
        let syscall = syscall.ok_or_else(|| rule_error(NO_NAME.to_owned()))?;
        let rule = check_rule(rule, syscall, &action).map_err(|r| rule_error(r.to_owned()))?;
        if let Some(owner) = owners.get(syscall).filter(|owner| *owner != name) {
            return Err(rule_error(format!(
                "already listed in section `{owner}`; a syscall belongs to one section, so that section order never matters"
            )));
        }
        owners.insert(syscall.to_owned(), name.to_owned());
        // seccompiler keeps only the rules with args when a syscall also has one without,
        // which would silently turn "deny always" into "deny sometimes".
        if denied.iter().any(|d| d.syscall == syscall && d.conditional != rule.conditional) {
            return Err(rule_error(MIXED_ARGS.to_owned()));
        }
        denied.push(rule);
    }
    Ok(denied)
}

const NO_NAME: &str = "must be an object whose `syscall` names the syscall";
const MIXED_ARGS: &str = "has rules both with and without `args`; seccompiler would keep only those with args";
const NR_RANGE: &str = "`nr` must be a syscall number from 424 up, where numbers are the same on every architecture";

/// The checks of one rule on its own; the error is the reason.
fn check_rule(rule: &Value, syscall: &str, action: &str) -> Result<DeniedSyscall, &'static str> {
    let comment = rule.get("comment").and_then(Value::as_str).map_or("", str::trim);
    if comment.is_empty() {
        return Err("needs a non-empty `comment` saying why the rule exists");
    }
    let conditional = match rule.get("args") {
        None => false,
        Some(Value::Array(args)) if !args.is_empty() => true,
        Some(_) => return Err("`args` must be a non-empty list; leave it out to match every call"),
    };
    match rule.get("nr").map(Value::as_u64) {
        None => {}
        Some(Some(424..=0xffff_ffff)) if !conditional => {}
        Some(Some(424..=0xffff_ffff)) => return Err("a rule with `nr` cannot have `args`"),
        Some(_) => return Err(NR_RANGE),
    }
    Ok(DeniedSyscall {
        syscall: syscall.to_owned(),
        action: action.to_owned(),
        conditional,
        comment: comment.to_owned(),
    })
}

/// How a program sees a match action: `EPERM` for `{"errno": 1}`, else the action's name.
/// `None` for "allow", which a deny-list section must not use.
fn describe_action(action: &Value) -> Option<String> {
    match action {
        Value::String(a) if a != "allow" => Some(a.clone()),
        Value::Object(a) if a.len() == 1 => {
            let (name, value) = a.iter().next()?;
            match (name.as_str(), value.as_i64().and_then(|n| i32::try_from(n).ok())) {
                ("errno", Some(n)) => Some(format!("{:?}", Errno::from_raw(n))),
                ("errno", None) => None,
                _ => Some(name.clone()),
            }
        }
        _ => None,
    }
}

/// Splits a section's numbered rules from the rest: returns the BPF that matches them
/// (loads the number, then one compare and return per rule) and the section without them,
/// for seccompiler, which would refuse their names.
fn numbered_rules(name: &str, body: &Value) -> Result<(Vec<libc::sock_filter>, Value), SeccompError> {
    let mut named = body.clone();
    let mut numbers = Vec::new();
    if let Some(rules) = named.get_mut("filter").and_then(Value::as_array_mut) {
        // `check_section` has checked that every `nr` fits.
        numbers.extend(rules.iter().filter_map(|r| u32::try_from(r.get("nr")?.as_u64()?).ok()));
        rules.retain(|r| r.get("nr").is_none());
    }
    if numbers.is_empty() {
        return Ok((Vec::new(), named));
    }
    let action = body
        .get("match_action")
        .or_else(|| body.get("filter_action"))
        .and_then(|a| serde_json::from_value::<SeccompAction>(a.clone()).ok())
        .ok_or_else(|| SeccompError::Section {
            section: name.to_owned(),
            reason: "match_action is not an action seccompiler knows".to_owned(),
        })?;
    let action = u32::from(action);
    let mut bpf = vec![stmt(LD_W_ABS, offset_of!(libc::seccomp_data, nr) as u32)];
    for nr in numbers {
        bpf.extend([jump(JEQ_K, nr, 0, 1), stmt(RET_K, action)]);
    }
    Ok((bpf, named))
}

/// A section field under its name or seccompiler's alias for it.
fn field<'a>(body: &'a Map<String, Value>, name: &str, alias: &str) -> Option<&'a Value> {
    body.get(name).or_else(|| body.get(alias))
}

/// Compiles one section, `named` being `body` without its numbered rules, on its own: an
/// `@arch` section names syscalls that other architectures lack, so the policy cannot go
/// to seccompiler in one piece.
fn compile_section(name: &str, body: &Value, named: &Value, target: TargetArch) -> Result<BpfProgram, SeccompError> {
    compile(name, named, target).map_err(|reason| {
        blame_rule(name, body, named, target).unwrap_or(SeccompError::Section { section: name.to_owned(), reason })
    })
}

fn compile(name: &str, body: &Value, target: TargetArch) -> Result<BpfProgram, String> {
    let one = Value::Object(Map::from_iter([(name.to_owned(), body.clone())]));
    let json = serde_json::to_vec(&one).map_err(|e| e.to_string())?;
    let mut programs = seccompiler::compile_from_json(json.as_slice(), target).map_err(|e| e.to_string())?;
    programs.remove(name).ok_or_else(|| "seccompiler returned no program for it".to_owned())
}

/// On a compile error, finds the first rule that fails on its own, so the error can name
/// it by its index in `body`; `None` if the section fails even without rules (a
/// section-level mistake).
fn blame_rule(name: &str, body: &Value, named: &Value, target: TargetArch) -> Option<SeccompError> {
    let rules = body.get("filter")?.as_array()?;
    let with_rules = |rules: Vec<Value>| {
        let mut section = named.clone();
        section["filter"] = Value::Array(rules);
        section
    };
    compile(name, &with_rules(Vec::new()), target).ok()?;
    let mut by_name = rules.iter().enumerate().filter(|(_, r)| r.get("nr").is_none());
    by_name.find_map(|(index, rule)| {
        let reason = compile(name, &with_rules(vec![rule.clone()]), target).err()?;
        let syscall = rule.get("syscall").and_then(Value::as_str).unwrap_or("?").to_owned();
        Some(SeccompError::Rule { section: name.to_owned(), index, syscall, reason })
    })
}
