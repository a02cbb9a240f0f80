//! Where a job's ranks go: hosts and slots from `--host`, `--hostfile`, Slurm, or this host's
//! cores, the ranks per host (by slot, or round-robin when oversubscribed), and the
//! `PMI_process_mapping` that describes it.
//!
//! It owns the placement rules and their refusals ("more ranks than slots"). It never starts
//! anything and never reads the machine beyond its name and CPU affinity.

use super::args::{HostSource, LaunchOptions};
use crate::host::{available_cpus, hostname};
use crate::hosts::{self, HostSlots};
use crate::session;
use crate::slurm;

/// One host of the job.
#[derive(Debug, Clone)]
pub struct HostPlan {
    /// Name (and node id).
    pub name: String,
    /// Whether it is the launcher's own host.
    pub local: bool,
    /// Ranks placed on it.
    pub ranks: Vec<u32>,
}

/// Where every rank goes, and how remote hosts are reached.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// Job id.
    pub job_id: String,
    /// Ranks in the job.
    pub size: u32,
    /// Hosts with at least one rank.
    pub hosts: Vec<HostPlan>,
    /// Launch agent words (`ssh`, `ip netns exec`, `srun`).
    pub agent: Vec<String>,
    /// Cores per rank (Slurm's cpus-per-task).
    pub cpus_per_rank: u32,
}

fn is_local_name(name: &str) -> bool {
    let me = hostname();
    let short = me.split('.').next().unwrap_or(&me).to_string();
    name == "localhost" || name == "127.0.0.1" || name == me || name == short
}

/// Builds the plan from the options and the environment (Slurm variables).
pub fn plan(
    opts: &LaunchOptions,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<JobPlan, String> {
    let mut agent = opts.launch_agent.clone();
    // Slurm's --cpus-per-task, when it asks for more than one.
    let mut slurm_cpus_per_task = None;
    let host_slots: Vec<HostSlots> = match &opts.hosts {
        HostSource::List(list) => hosts::parse_host_list(list).map_err(|e| e.to_string())?,
        HostSource::File(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read hostfile {path}: {e}"))?;
            hosts::parse_hostfile(&text, path).map_err(|e| e.to_string())?
        }
        HostSource::Default => {
            match slurm::allocation_from_env(lookup).map_err(|e| e.to_string())? {
                Some(alloc) => {
                    slurm_cpus_per_task = Some(alloc.cpus_per_task).filter(|&c| c > 1);
                    if agent.is_none() {
                        agent = Some("srun".into());
                    }
                    alloc
                        .hosts
                        .into_iter()
                        .map(|(name, slots)| HostSlots {
                            name,
                            slots: Some(slots),
                        })
                        .collect()
                }
                None => {
                    // One slot per core this launcher may run on, as Open MPI counts them: more
                    // ranks than that is oversubscription, which must be asked for.
                    let cores = available_cpus().len().max(1) as u32;
                    let asked = opts
                        .np
                        .map(|n| n + opts.more_apps.iter().map(|a| a.np).sum::<u32>());
                    if let (Some(asked), false) = (asked, opts.oversubscribe) {
                        if asked > cores {
                            return Err(format!(
                                "{asked} ranks requested but this host ({}) has {cores} slot{} \
                                 (one per core kestrel-run may use); start at most {cores}, \
                                 add hosts (--host, --hostfile), or allow more ranks than cores \
                                 with --oversubscribe",
                                hostname(),
                                if cores == 1 { "" } else { "s" }
                            ));
                        }
                    }
                    vec![HostSlots {
                        name: hostname(),
                        slots: Some(cores),
                    }]
                }
            }
        }
    };
    let extra: u32 = opts.more_apps.iter().map(|a| a.np).sum();
    let np = match opts.np {
        Some(n) => n + extra,
        None => match host_slots.iter().map(|h| h.slots).sum::<Option<u32>>() {
            Some(total) => total,
            None => available_cpus().len().max(1) as u32,
        },
    };
    let per_host = hosts::map_by_slot(&host_slots, np, opts.oversubscribe)?;
    let hosts: Vec<HostPlan> = host_slots
        .iter()
        .zip(per_host)
        .filter(|(_, ranks)| !ranks.is_empty())
        .map(|(h, ranks)| HostPlan {
            local: is_local_name(&h.name),
            name: h.name.clone(),
            ranks,
        })
        .collect();
    let cpus_per_rank = opts
        .cpus_per_rank
        .or(slurm_cpus_per_task)
        .or_else(|| omp_threads(opts, lookup))
        .unwrap_or(1);
    let agent = agent
        .unwrap_or_else(|| "ssh".into())
        .split_whitespace()
        .map(String::from)
        .collect();
    Ok(JobPlan {
        job_id: opts.job_id.clone().unwrap_or_else(session::new_job_id),
        size: np,
        hosts,
        agent,
        cpus_per_rank,
    })
}

/// `OMP_NUM_THREADS` as the ranks will see it (exported with `-x`, else inherited from the
/// launcher's environment): its first value (a nested list `4,2` gives the outer level's
/// threads) when it is a whole number from 1 to 4096.
fn omp_threads(opts: &LaunchOptions, lookup: &dyn Fn(&str) -> Option<String>) -> Option<u32> {
    let value = opts
        .env
        .iter()
        .rev()
        .find(|(n, _)| n == "OMP_NUM_THREADS")
        .map(|(_, v)| v.clone())
        .or_else(|| lookup("OMP_NUM_THREADS"))?;
    let first = value.split(',').next()?.trim().parse::<u32>().ok()?;
    (1..=4096).contains(&first).then_some(first)
}

/// `PMI_process_mapping` for a plan whose hosts hold contiguous, increasing rank blocks
/// (`(vector,(0,2,4))` = 2 nodes from node 0 with 4 ranks each); empty when it cannot be
/// expressed that way (oversubscribed round-robin placement).
pub fn process_mapping(hosts: &[HostPlan]) -> String {
    let mut next = 0u32;
    let mut blocks: Vec<(usize, usize, usize)> = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let contiguous = h
            .ranks
            .iter()
            .enumerate()
            .all(|(k, &r)| r == next + k as u32);
        if !contiguous {
            return String::new();
        }
        next += h.ranks.len() as u32;
        let ppn = h.ranks.len();
        match blocks.last_mut() {
            Some((_, count, p)) if *p == ppn => *count += 1,
            _ => blocks.push((i, 1, ppn)),
        }
    }
    let parts: Vec<String> = blocks
        .iter()
        .map(|(start, count, ppn)| format!("({start},{count},{ppn})"))
        .collect();
    format!("(vector,{})", parts.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launcher::args::{AppContext, Bind};

    /// A command line running `x` with `np` ranks on `hosts`, everything else by default.
    fn options(np: Option<u32>, hosts: HostSource) -> LaunchOptions {
        LaunchOptions {
            np,
            hosts,
            oversubscribe: false,
            mca: vec![],
            env: vec![],
            bind: Bind::Auto,
            cpus_per_rank: None,
            report_bindings: false,
            tag_output: false,
            timeout: None,
            timeout_stacks: false,
            launch_agent: None,
            program: "x".into(),
            args: vec![],
            more_apps: vec![],
            wdir: None,
            job_id: None,
        }
    }

    #[test]
    fn cores_per_rank_come_from_the_option_then_slurm_then_omp_num_threads() {
        let mut opts = options(Some(2), HostSource::List("h1:2".into()));
        let none = |_: &str| None;
        assert_eq!(plan(&opts, &none).unwrap().cpus_per_rank, 1);
        let omp = |v: &str| (v == "OMP_NUM_THREADS").then(|| "4,2".to_string());
        assert_eq!(plan(&opts, &omp).unwrap().cpus_per_rank, 4);
        // Exported with -x, it is what the ranks see.
        opts.env = vec![("OMP_NUM_THREADS".into(), "3".into())];
        assert_eq!(plan(&opts, &omp).unwrap().cpus_per_rank, 3);
        opts.env = vec![("OMP_NUM_THREADS".into(), "many".into())];
        assert_eq!(plan(&opts, &none).unwrap().cpus_per_rank, 1);
        opts.cpus_per_rank = Some(2);
        assert_eq!(plan(&opts, &omp).unwrap().cpus_per_rank, 2);
        // Inside Slurm, --cpus-per-task wins over OMP_NUM_THREADS, the option over both.
        let mut opts = options(None, HostSource::Default);
        let slurm = |v: &str| match v {
            "SLURM_JOB_ID" => Some("7".to_string()),
            "SLURM_NODELIST" => Some("n1".to_string()),
            "SLURM_TASKS_PER_NODE" => Some("2".to_string()),
            "SLURM_CPUS_PER_TASK" => Some("6".to_string()),
            "OMP_NUM_THREADS" => Some("4".to_string()),
            _ => None,
        };
        assert_eq!(plan(&opts, &slurm).unwrap().cpus_per_rank, 6);
        opts.cpus_per_rank = Some(5);
        assert_eq!(plan(&opts, &slurm).unwrap().cpus_per_rank, 5);
    }

    fn hp(ranks: &[u32]) -> HostPlan {
        HostPlan {
            name: "h".into(),
            local: false,
            ranks: ranks.to_vec(),
        }
    }

    #[test]
    fn process_mapping_compresses_blocks() {
        assert_eq!(process_mapping(&[hp(&[0, 1, 2, 3])]), "(vector,(0,1,4))");
        assert_eq!(
            process_mapping(&[hp(&[0, 1]), hp(&[2, 3]), hp(&[4])]),
            "(vector,(0,2,2),(2,1,1))"
        );
        assert_eq!(process_mapping(&[hp(&[0, 2]), hp(&[1, 3])]), "");
    }

    #[test]
    fn plans_follow_slots_and_slurm() {
        let mut opts = options(Some(3), HostSource::List("a:2,b:2".into()));
        let p = plan(&opts, &|_| None).unwrap();
        assert_eq!(
            p.hosts.iter().map(|h| h.ranks.clone()).collect::<Vec<_>>(),
            vec![vec![0, 1], vec![2]]
        );
        assert_eq!(p.agent, vec!["ssh"]);
        opts.np = Some(5);
        assert!(plan(&opts, &|_| None)
            .unwrap_err()
            .contains("--oversubscribe"));
        opts.hosts = HostSource::Default;
        opts.np = None;
        let slurm = |v: &str| match v {
            "SLURM_JOB_ID" => Some("77".to_string()),
            "SLURM_NODELIST" => Some("n[1-2]".to_string()),
            "SLURM_TASKS_PER_NODE" => Some("2(x2)".to_string()),
            "SLURM_CPUS_PER_TASK" => Some("2".to_string()),
            _ => None,
        };
        let p = plan(&opts, &slurm).unwrap();
        assert_eq!(
            (p.size, p.cpus_per_rank, p.agent.clone()),
            (4, 2, vec!["srun".to_string()])
        );
        let bad = |v: &str| {
            if v == "SLURM_CPUS_PER_TASK" {
                Some("0".to_string())
            } else {
                slurm(v)
            }
        };
        assert!(plan(&opts, &bad)
            .unwrap_err()
            .contains("SLURM_CPUS_PER_TASK"));
    }

    #[test]
    fn this_host_has_a_slot_per_core() {
        let cores = available_cpus().len() as u32;
        let mut opts = options(Some(cores + 1), HostSource::Default);
        let e = plan(&opts, &|_| None).unwrap_err();
        assert!(
            e.contains(&format!("{} ranks requested", cores + 1))
                && e.contains(&format!("has {cores} slot"))
                && e.contains("--oversubscribe"),
            "{e}"
        );
        opts.oversubscribe = true;
        assert_eq!(plan(&opts, &|_| None).unwrap().size, cores + 1);
        opts.oversubscribe = false;
        opts.np = None;
        assert_eq!(plan(&opts, &|_| None).unwrap().size, cores);
        // MPMD contexts count too.
        opts.np = Some(cores);
        opts.more_apps = vec![AppContext {
            np: 1,
            program: "y".into(),
            args: vec![],
        }];
        assert!(plan(&opts, &|_| None).is_err());
    }
}
