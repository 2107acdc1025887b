# The command line shared by the scripts that regenerate result pages (sourced, not run).
#
# A script defines one bash function per section, sets SECTIONS (the sections 'all' runs, in order) and OTHERS
# (sections run only when named), sources this file and calls: run_sections "$@". Without arguments it lists the
# sections; section names are written with '-' or '_'.

run_sections() {
    if [[ $# -eq 0 ]]; then
        echo "sections ('all' runs these, in order): ${SECTIONS[*]//_/-}"
        if [[ ${#OTHERS[@]} -gt 0 ]]; then
            echo "other sections (run only when named): ${OTHERS[*]//_/-}"
        fi
        return 0
    fi
    local section name
    for section in "$@"; do
        if [[ $section == all ]]; then
            for name in "${SECTIONS[@]}"; do "$name"; done
            continue
        fi
        name=${section//-/_}
        if [[ " ${SECTIONS[*]} ${OTHERS[*]} " != *" $name "* ]]; then
            echo "unknown section $section (run without arguments for the list)" >&2
            return 2
        fi
        "$name"
    done
}
