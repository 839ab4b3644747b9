package reqdetect

// langPT is the cue table of Portuguese (rule 9; languages.go reads it).
var langPT = &langTable{
	code: "pt", name: "Portuguese", presented: "anexos anexado anexada segue seguem exportada exportado", attach: "anexo",
	delivery:  "anexa* anexe* exporte salva salvar salve salvá* entregue publique disponibiliz* descarregar descarregável anexe* anexa*",
	send:      "envie compartilhe*",
	output:    "cria criar crie escreva escrever redija gere gerar prepare produza elabore faça monte monta montar",
	transform: "converta converter converte transforme traduza",
	input:     "leia ler resumo analise analisar revise examine use utilize consulte abra verifique execute* executa* rode",
	reply:     "responda explique diga", inline: "aqui resposta", negators: "não> nao> nenhum nenhuma sem> nunca>",
	fileWords: "arquivo arquivos", model: "exemplo baseado baseada baseando mesmo mesma seguindo",
	modelNouns: "modelo exemplo", destPreps: "em para", namingPreps: "como", sourcePreps: "partir_de a_partir_de dados_de cópia_de da",
	productNouns: "botão ferramenta função aplicativo serviço opção funcionalidade",
	featureVerbs: "adicione adiciona* implemente", whWords: "quem quando qual como onde porque",
	perfect:      "tenho tem temos têm já",
	function:     "os uma da dos das em não favor ao como na nos nas um é você seu sua pelo pela também quando mas",
	deliverables: "entregáveis entregável entregas arquivos_de_saída",
	inputs:       "arquivos_de_entrada referências fontes anexos contexto situação dados_de_entrada materiais_de_apoio",
	edit:         "atualiz* corrij* corrig* correção correções modifique* modifica* ajust* edite* edita* conserte*",
	naming:       "chame chame-o chame-a chamar chama nomeie* nomeia* intitule*", polite: "por_favor favor", repo: "branch teste testes",
	bug: "erro", nounMarks: "do dos", pointers: "este esta", clitics: "-o -a -os -as",
	other:  "outro* outra* adiciona*",
	toward: "ao",
}
